"""SFT datasets (the rows ``rllm-cli replay --out`` writes, .jsonl or .parquet) to training
sequences whose loss mask covers the sampled (assistant) tokens only.

A row is one step: its full prompt and its sampled response. Rows with token IDs train on
those IDs; rows without them (text only) are tokenized with the model's chat template,
the last message being the response. Rows of one session whose prompt extends the
previous row's prompt + response are merged into one sequence, as the trainer does with
multi-turn trajectories; prompts and tool output stay masked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rllm.consumers.trainer.errors import SftDataError
from rllm.consumers.trainer.types import TrainSequence

__all__ = ["SftDataError", "SftDataset", "SftRow", "load_sft_dataset", "read_rows", "row_tokens"]

_REQUIRED = ("session_id", "step_index", "messages")
_OPTIONAL_STR = ("run_id", "task_id", "benchmark", "model")


@dataclass(frozen=True)
class SftRow:
    """One validated dataset row."""

    where: str
    """``<file> line N`` (JSONL) or ``<file> row N`` (Parquet), 1-based."""
    session_id: str
    """Session of the step."""
    step_index: int
    """Order of the step within its session."""
    messages: list[dict[str, Any]]
    """Chat messages: the prompt's, then the assistant's answer."""
    prompt_token_ids: list[int]
    """Full prompt token IDs (empty for a text-only row)."""
    response_token_ids: list[int]
    """Sampled token IDs (empty for a text-only row)."""

    @property
    def has_tokens(self) -> bool:
        """Whether the row carries token IDs."""
        return bool(self.response_token_ids)


def _bad(where: str, name: str, problem: str) -> SftDataError:
    return SftDataError(
        f"{where}: field {name!r} {problem}; rows must be as `rllm-cli replay --out` writes them"
    )


def _token_list(raw: dict[str, Any], name: str, where: str) -> list[int]:
    value = raw.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(where, name, f"must be a list of token IDs, got {type(value).__name__}")
    for i, v in enumerate(value):
        if type(v) is not int or v < 0:
            raise _bad(where, name, f"must hold non-negative ints, got {v!r} at index {i}")
    return value


def _validate(raw: Any, where: str, messages_as_json: bool) -> SftRow:
    if not isinstance(raw, dict):
        raise SftDataError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    for name in _REQUIRED:
        if raw.get(name) is None:
            raise _bad(where, name, "is missing")
    if not isinstance(raw["session_id"], str) or not raw["session_id"]:
        raise _bad(where, "session_id", f"must be a non-empty string, got {raw['session_id']!r}")
    if type(raw["step_index"]) is not int:
        raise _bad(where, "step_index", f"must be an int, got {raw['step_index']!r}")
    for name in _OPTIONAL_STR:
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise _bad(where, name, f"must be a string, got {raw[name]!r}")
    reward = raw.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise _bad(where, "reward", f"must be a number or null, got {reward!r}")
    if raw.get("is_correct") is not None and not isinstance(raw["is_correct"], bool):
        raise _bad(where, "is_correct", f"must be true, false or null, got {raw['is_correct']!r}")
    messages = raw["messages"]
    if messages_as_json:
        try:
            messages = json.loads(messages)
        except (TypeError, ValueError) as exc:
            raise _bad(where, "messages", f"is not a JSON string ({exc})") from exc
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _bad(where, "messages", "must be a list of message objects")
    prompt = _token_list(raw, "prompt_token_ids", where)
    response = _token_list(raw, "response_token_ids", where)
    if response and not prompt:
        raise _bad(where, "prompt_token_ids", "is empty while response_token_ids is not")
    if prompt and not response:
        raise _bad(where, "response_token_ids", "is empty while prompt_token_ids is not")
    return SftRow(where, raw["session_id"], raw["step_index"], messages, prompt, response)


def _jsonl_rows(path: Path) -> Iterator[SftRow]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path} line {n}"
            try:
                raw = json.loads(line)
            except ValueError as exc:
                raise SftDataError(f"{where}: not valid JSON ({exc})") from exc
            yield _validate(raw, where, messages_as_json=False)


def _parquet_rows(path: Path) -> Iterator[SftRow]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise SftDataError(f"{path}: not a readable Parquet file ({exc})") from exc
    names = set(pf.schema_arrow.names)
    for name in _REQUIRED:
        if name not in names:
            raise SftDataError(
                f"{path}: column {name!r} is missing (has {sorted(names)}); rows must be as "
                f"`rllm-cli replay --out` writes them"
            )
    n = 0
    for batch in pf.iter_batches(batch_size=1024):
        for raw in batch.to_pylist():
            n += 1
            yield _validate(raw, f"{path} row {n}", messages_as_json=True)


def read_rows(path: Path) -> Iterator[SftRow]:
    """Validated rows of a .jsonl or .parquet dataset, in file order.

    Raises:
        SftDataError: for a missing file, another suffix, or a bad row (naming the file,
            the line or row number and the field).
    """
    if path.suffix not in (".jsonl", ".parquet"):
        raise SftDataError(f"{path}: an SFT dataset is .jsonl or .parquet, not {path.suffix!r}")
    if not path.is_file():
        raise SftDataError(f"{path}: no such dataset file (write one with rllm-cli replay --out)")
    return _jsonl_rows(path) if path.suffix == ".jsonl" else _parquet_rows(path)


def row_tokens(row: SftRow, tokenizer: Any | None) -> tuple[list[int], list[int]]:
    """``(prompt_ids, response_ids)`` of a row: its own IDs, or its messages rendered
    with the tokenizer's chat template (the last message is the response).

    Raises:
        SftDataError: naming the row, when a text-only row cannot be tokenized.
    """
    if row.has_tokens:
        return row.prompt_token_ids, row.response_token_ids
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        why = (
            "no tokenizer is available"
            if tokenizer is None
            else "the tokenizer has no chat template"
        )
        raise SftDataError(
            f"{row.where}: the row has no token IDs and {why} to tokenize its messages; "
            f"train with a backend that has a local tokenizer (--backend local) or write "
            f"the dataset with token IDs (rllm-cli replay keeps the sampled IDs)"
        )
    last = row.messages[-1] if row.messages else {}
    if last.get("role") != "assistant" or not isinstance(last.get("content"), str):
        raise _bad(row.where, "messages", "must end with the assistant's answer (string content)")
    try:
        prompt_text = tokenizer.apply_chat_template(
            row.messages[:-1], tokenize=False, add_generation_prompt=True
        )
        full_text = tokenizer.apply_chat_template(row.messages, tokenize=False)
    except Exception as exc:  # jinja2 and transformers raise many kinds; name the row
        raise SftDataError(f"{row.where}: the chat template cannot render it: {exc}") from exc
    if not isinstance(prompt_text, str) or not full_text.startswith(prompt_text):
        raise SftDataError(
            f"{row.where}: the chat template does not render the prompt as a prefix of the "
            f"conversation, so the answer's tokens cannot be separated; write the dataset "
            f"with token IDs"
        )
    prompt = list(tokenizer(prompt_text, add_special_tokens=False)["input_ids"])
    response = list(tokenizer(full_text[len(prompt_text) :], add_special_tokens=False)["input_ids"])
    if not prompt or not response:
        raise SftDataError(f"{row.where}: the chat template renders an empty prompt or answer")
    return prompt, response


@dataclass
class SftDataset:
    """A dataset file turned into training sequences."""

    path: Path
    """The file."""
    sequences: list[TrainSequence]
    """Training sequences, sessions in file order, steps in ``step_index`` order."""
    rows: int = 0
    """Rows read (duplicates included)."""
    text_rows: int = 0
    """Rows tokenized with the chat template (they had no token IDs)."""
    duplicates: int = 0
    """Rows skipped because an identical row (same session and step) came earlier."""
    notes: list[str] = field(default_factory=list)
    """One line per skipped duplicate."""

    @property
    def num_tokens(self) -> int:
        """Tokens that carry loss, over all sequences."""
        return sum(s.num_loss_tokens for s in self.sequences)


def _check_vocab(ids: list[int], vocab_size: int | None, where: str, name: str) -> None:
    if vocab_size is not None and ids and max(ids) >= vocab_size:
        raise _bad(
            where,
            name,
            f"holds token ID {max(ids)}, beyond the model's vocabulary of {vocab_size} "
            f"(was the dataset sampled from another model?)",
        )


def load_sft_dataset(
    path: Path,
    tokenizer: Any | None = None,
    *,
    rows: list[SftRow] | None = None,
    merge_steps: bool = True,
    vocab_size: int | None = None,
) -> SftDataset:
    """Read (or take the already read ``rows`` of) ``path`` and build its sequences.

    Args:
        path: A .jsonl or .parquet dataset from ``rllm-cli replay --out``.
        tokenizer: HF tokenizer for text-only rows (None: such rows are refused).
        rows: Rows already read from ``path`` by ``read_rows``.
        merge_steps: Merge a session's row into the previous sequence when its prompt
            extends that sequence.
        vocab_size: Refuse token IDs at or beyond this.

    Raises:
        SftDataError: for a bad file or row, two different rows for one session step, or
            a file without rows.
    """
    data = SftDataset(path=path, sequences=[])
    sessions: dict[str, dict[int, tuple[SftRow, list[int], list[int]]]] = {}
    for row in rows if rows is not None else list(read_rows(path)):  # the whole file first
        data.rows += 1
        prompt, response = row_tokens(row, tokenizer)
        data.text_rows += not row.has_tokens
        _check_vocab(prompt, vocab_size, row.where, "prompt_token_ids")
        _check_vocab(response, vocab_size, row.where, "response_token_ids")
        steps = sessions.setdefault(row.session_id, {})
        first = steps.get(row.step_index)
        if first is not None:
            if (first[1], first[2], first[0].messages) != (prompt, response, row.messages):
                raise SftDataError(
                    f"{row.where} and {first[0].where} are both step {row.step_index} of "
                    f"session {row.session_id} but differ; remove one"
                )
            data.duplicates += 1
            data.notes.append(f"{row.where}: duplicate of {first[0].where}; skipped")
            continue
        steps[row.step_index] = (row, prompt, response)
    if data.rows == 0:
        raise SftDataError(f"{path}: the dataset has no rows")
    for session_id, steps in sessions.items():
        cur: TrainSequence | None = None
        for index in sorted(steps):
            _, prompt, response = steps[index]
            step_id = f"{session_id}/{index}"
            n = len(cur.input_ids_T) if cur is not None else 0
            if (
                merge_steps
                and cur is not None
                and len(prompt) >= n
                and prompt[:n] == cur.input_ids_T
            ):
                tail = prompt[n:]
                cur.input_ids_T += tail + response
                cur.loss_mask_T += [0] * len(tail) + [1] * len(response)
                cur.logprobs_T += [0.0] * (len(tail) + len(response))
                cur.step_ids = (*cur.step_ids, step_id)
                continue
            cur = TrainSequence(
                episode_id=f"sft:{session_id}",
                session_id=session_id,
                step_ids=(step_id,),
                input_ids_T=prompt + response,
                loss_mask_T=[0] * len(prompt) + [1] * len(response),
                logprobs_T=[0.0] * (len(prompt) + len(response)),
                advantage=1.0,
            )
            data.sequences.append(cur)
    return data
