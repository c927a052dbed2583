"""SFT on replayed datasets: rows written by the real replay writers become sequences whose
masks cover exactly the sampled tokens; a tiny model's loss falls over epochs; checkpoints
count versions up and resume; bad files are refused naming file, row and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.consumers.replay import ReplayFilter, select_examples, write_dataset
from rllm.consumers.replay.select import SessionRecord
from rllm.consumers.replay.types import SftExample
from rllm.consumers.trainer.checkpoint import CheckpointStore
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.sft_data import SftDataError, load_sft_dataset, read_rows
from rllm.consumers.trainer.sft_loop import epoch_order, train_sft
from rllm.errors import ConfigError
from rllm.models.loading import load_model
from rllm.schemas.tokens import pack_tokens

# step 0: prompt 3 tokens, answer 2; step 1 (delta-encoded): previous 5 tokens + 3 tool
# output tokens as prompt, answer 3. Merged: 11 tokens, mask 00011000111 (5 loss tokens).
P0, R0, TOOL, R1 = [5, 6, 7], [8, 9], [10, 11, 12], [13, 14, 15]


def _step(i: int, prompt: list[int], resp: list[int], prefix: int = 0) -> dict[str, Any]:
    return {
        "step_id": f"st{i}",
        "step_index": i,
        "parent_step_id": f"st{i - 1}" if prefix else "",
        "prompt_prefix_len": prefix,
        "prompt_token_ids": pack_tokens(prompt),  # bytes, as read from the topic
        "response_token_ids": pack_tokens(resp),
        "request_json": '{"messages": [{"role": "user", "content": "q"}]}',
        "response_json": '{"choices": [{"message": {"content": "a"}}]}',
        "error_kind": "",
        "token_status": "ok",
        "model": "tiny",
    }


def _sessions() -> list[SessionRecord]:
    multi: SessionRecord = {
        "session_id": "multi",
        "run_id": "r",
        "task_id": "t1",
        "benchmark": "b",
        "model": "tiny",
        "reward": 1.0,
        "is_correct": True,
        "steps": [_step(0, P0, R0), _step(1, TOOL, R1, prefix=5)],
    }
    single = {**multi, "session_id": "single", "task_id": "t2"}
    single["steps"] = [_step(0, [20, 21, 22, 23], [30, 31, 32, 33])]
    return [multi, single]


def _write(tmp_path: Path, suffix: str, extra: tuple[SftExample, ...] = ()) -> Path:
    path = tmp_path / f"sft{suffix}"
    examples = select_examples(_sessions(), ReplayFilter())
    assert len(examples) == 3
    assert write_dataset([*examples, *extra], path) == 3 + len(extra)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_masks_cover_exactly_the_sampled_tokens(tmp_path: Path, suffix: str) -> None:
    path = _write(tmp_path, suffix)
    data = load_sft_dataset(path)
    assert (data.rows, data.duplicates, data.text_rows) == (3, 0, 0)
    merged, single = data.sequences
    assert merged.input_ids_T == P0 + R0 + TOOL + R1
    assert merged.loss_mask_T == [0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1]
    assert merged.step_ids == ("multi/0", "multi/1")
    assert single.loss_mask_T == [0, 0, 0, 0, 1, 1, 1, 1]
    assert data.num_tokens == 5 + 4

    unmerged = load_sft_dataset(path, merge_steps=False)
    assert [s.num_loss_tokens for s in unmerged.sequences] == [2, 3, 4]
    second = unmerged.sequences[1]
    assert second.input_ids_T == P0 + R0 + TOOL + R1
    assert second.loss_mask_T == [0] * 8 + [1, 1, 1]  # the first answer is step 0's row


def _text_example() -> SftExample:
    return SftExample(
        session_id="text",
        run_id="r",
        task_id="t3",
        benchmark="b",
        model="other",
        step_index=0,
        reward=1.0,
        is_correct=True,
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    )


def test_text_rows_are_tokenized_with_the_chat_template(tmp_path: Path, tiny_model: Path) -> None:
    path = _write(tmp_path, ".parquet", (_text_example(),))
    tok = load_model(str(tiny_model)).tokenizer
    data = load_sft_dataset(path, tok)
    assert (data.rows, data.text_rows) == (4, 1)
    text = data.sequences[-1]
    # template: "<u>hi|<a>" (9 chars) then the answer "yo|" (3 chars), one token per char
    assert len(text.input_ids_T) == 12 and text.num_loss_tokens == 3
    assert text.loss_mask_T == [0] * 9 + [1] * 3
    assert tok.decode(text.input_ids_T[9:]) == "yo|"

    with pytest.raises(SftDataError, match=r"sft\.parquet row 4: the row has no token IDs"):
        load_sft_dataset(path)


def test_duplicates_are_counted_and_conflicts_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, ".jsonl")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[0], "", lines[2]]) + "\n")
    data = load_sft_dataset(path)
    assert (data.rows, data.duplicates, len(data.sequences), data.num_tokens) == (5, 2, 2, 9)
    assert data.notes == [
        f"{path} line 4: duplicate of {path} line 1; skipped",
        f"{path} line 6: duplicate of {path} line 3; skipped",
    ]
    changed = json.loads(lines[0])
    changed["response_token_ids"] = [8, 40]
    path.write_text("\n".join([*lines, json.dumps(changed)]) + "\n")
    with pytest.raises(
        SftDataError, match=r"line 4 and .* line 1 are both step 0 of session multi"
    ):
        load_sft_dataset(path)


def _jsonl_with(tmp_path: Path, change: dict[str, Any], drop: str = "") -> Path:
    path = _write(tmp_path, ".jsonl")
    lines = path.read_text().splitlines()
    row = {**json.loads(lines[1]), **change}
    row.pop(drop, None)
    path.write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n")
    return path


@pytest.mark.parametrize(
    ("change", "drop", "message"),
    [
        ({}, "session_id", r"line 2: field 'session_id' is missing"),
        ({"step_index": "1"}, "", r"line 2: field 'step_index' must be an int, got '1'"),
        ({"prompt_token_ids": [1, "x"]}, "", r"line 2: field 'prompt_token_ids' must hold .*'x'"),
        ({"response_token_ids": {}}, "", r"line 2: field 'response_token_ids' must be a list"),
        ({"messages": "hi"}, "", r"line 2: field 'messages' must be a list"),
        ({"reward": "high"}, "", r"line 2: field 'reward' must be a number or null"),
        ({"response_token_ids": []}, "", r"line 2: field 'response_token_ids' is empty while"),
    ],
)
def test_bad_jsonl_rows_name_file_line_and_field(
    tmp_path: Path, change: dict[str, Any], drop: str, message: str
) -> None:
    path = _jsonl_with(tmp_path, change, drop)
    with pytest.raises(SftDataError, match=message) as info:
        load_sft_dataset(path)
    assert str(path) in str(info.value)


def test_bad_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session_id": "s"}\n{not json\n')
    with pytest.raises(SftDataError, match=r"bad\.jsonl line 1: field 'step_index' is missing"):
        list(read_rows(bad))
    bad.write_text("[1, 2]\n")
    with pytest.raises(SftDataError, match=r"line 1: expected a JSON object, got list"):
        list(read_rows(bad))
    bad.write_text("\n")
    with pytest.raises(SftDataError, match=r"bad\.jsonl: the dataset has no rows"):
        load_sft_dataset(bad)
    with pytest.raises(SftDataError, match=r"rows\.csv: an SFT dataset is \.jsonl or \.parquet"):
        load_sft_dataset(tmp_path / "rows.csv")
    with pytest.raises(SftDataError, match=r"missing\.parquet: no such dataset file"):
        load_sft_dataset(tmp_path / "missing.parquet")

    parquet = tmp_path / "cols.parquet"
    pq.write_table(pa.table({"session_id": ["s"], "messages": ["[]"]}), parquet)
    with pytest.raises(SftDataError, match=r"cols\.parquet: column 'step_index' is missing"):
        load_sft_dataset(parquet)
    pq.write_table(
        pa.table({"session_id": ["s", "s"], "step_index": [0, 1], "messages": ["[]", "[{"]}),
        parquet,
    )
    with pytest.raises(SftDataError, match=r"cols\.parquet row 2: field 'messages' is not a JSON"):
        load_sft_dataset(parquet)

    ok = _write(tmp_path, ".jsonl")
    with pytest.raises(SftDataError, match=r"line 3: field 'prompt_token_ids' holds token ID 23"):
        load_sft_dataset(ok, vocab_size=23)


def _settings(tiny_model: Path, tmp_path: Path, **kw: Any) -> TrainerSettings:
    return TrainerSettings(
        model=str(tiny_model), checkpoint_dir=tmp_path / "ckpt", run_id="sft", lr=1e-2, **kw
    )


def test_train_sft_lowers_the_loss_and_checkpoints_versions(
    tmp_path: Path, tiny_model: Path
) -> None:
    path = _write(tmp_path, ".jsonl")
    report = train_sft(_settings(tiny_model, tmp_path, batch_size=2), path, epochs=3)
    assert (report.sequences, report.tokens_per_epoch, report.updates) == (2, 9, 3)
    assert report.version == 3 and report.tokens == 27 and report.published == 0
    assert report.losses[2] < report.losses[1] < report.losses[0]
    store = CheckpointStore(tmp_path / "ckpt", "sft")
    found = store.latest()
    assert found is not None
    ckpt, state = found
    assert ckpt.name == "v000003" and state.version == 3
    assert [h["version"] for h in state.history] == [1, 2, 3]
    assert [h["epoch"] for h in state.history] == [0, 1, 2]
    key = f"sft:{path.resolve()}"
    assert state.offsets[key] == {"sequences": 2, "batch_size": 2, "position": 3}

    # the same run resumes from v3 and trains the remaining epochs only
    more = train_sft(_settings(tiny_model, tmp_path, batch_size=2), path, epochs=5)
    assert (more.resumed_version, more.updates, more.version) == (3, 2, 5)
    assert more.losses[-1] < report.losses[-1]
    with pytest.raises(ConfigError, match=r"the file or batch size changed"):
        train_sft(_settings(tiny_model, tmp_path, batch_size=1), path, epochs=9)


def test_batches_split_epochs_and_max_updates_stops(tmp_path: Path, tiny_model: Path) -> None:
    path = _write(tmp_path, ".parquet")
    report = train_sft(_settings(tiny_model, tmp_path, batch_size=1, max_updates=3), path, epochs=2)
    assert (report.updates, report.version) == (3, 3)
    first, second = epoch_order(2, 0, 0, True), epoch_order(2, 1, 0, True)
    per_seq = {0: 5, 1: 4}
    assert report.tokens == per_seq[first[0]] + per_seq[first[1]] + per_seq[second[0]]
    assert epoch_order(4, 0, 0, False) == [0, 1, 2, 3]
    assert sorted(epoch_order(50, 3, 7, True)) == list(range(50))


def test_train_sft_refuses_another_loss(tmp_path: Path, tiny_model: Path) -> None:
    settings = _settings(tiny_model, tmp_path, loss="grpo")
    with pytest.raises(ConfigError, match=r"loss=grpo; set loss='sft'"):
        train_sft(settings, _write(tmp_path, ".jsonl"))


def test_cli_trains_sft_offline_and_refuses_data_file_without_sft(
    tmp_path: Path, tiny_model: Path
) -> None:
    path = _write(tmp_path, ".jsonl")
    env = {"RLLM_BOOTSTRAP_SERVERS": None, "RLLM_LOSS": None}
    args = ["train", "sft", "--data-file", str(path), "--model", str(tiny_model), "--run-id", "c"]
    args += ["--checkpoint-dir", str(tmp_path / "ck"), "--lr", "0.01", "--batch-size", "1"]
    result = CliRunner(env=env).invoke(cli, [*args, "--loss", "sft", "--epochs", "2"])
    assert result.exit_code == 0, result.output
    assert "3 rows -> 2 sequences (9 loss tokens per epoch" in result.output
    assert "trained 4 update(s), 18 tokens; policy version 4; loss" in result.output
    assert "PolicyUpdated" not in result.output
    assert (tmp_path / "ck" / "c" / "LATEST").read_text() == "v000004"

    offline = CliRunner(env={**env, "RLLM_BOOTSTRAP_SERVERS": "127.0.0.1:1"}).invoke(
        cli, [*args, "--loss", "sft", "--run-id", "c2", "--offline"]
    )  # a configured but unreachable broker is not contacted
    assert offline.exit_code == 0, offline.output
    assert "trained 2 update(s), 9 tokens; policy version 2" in offline.output

    unreachable = CliRunner(env=env).invoke(
        cli, [*args, "--loss", "sft", "--run-id", "c3", "-b", "127.0.0.1:1"]
    )
    assert unreachable.exit_code == 1 and "127.0.0.1:1" in unreachable.output
    assert not (tmp_path / "ck" / "c3").exists()  # refused before training

    refused = CliRunner(env=env).invoke(cli, ["train", *args[2:]])  # the loop, not sft
    assert refused.exit_code == 1
    assert "without --benchmark is an SFT dataset: train on it with `rllm-cli train sft" in (
        " ".join(refused.output.split())
    )
