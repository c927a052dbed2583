"""Synthetic long CLI-agent sessions, as the gateway captures them: a large system prompt,
many turns, each turn's prompt the whole history plus the tool's output (delta-encoded
against the previous step), and each request the whole message history with the tools
after it. Events are generated one at a time (a 200-step session's requests add up to
tens of MB); ``reference`` is the merged training sequence built from the plan alone,
without any prompt restoring, for the trainer's output to be compared with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from tests.unit.processors.factory import T0, chat_response, envelopes

__all__ = ["CliSession", "Reference"]

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))
_VOCAB = 50_000
_WORDS = np.array(
    ["".join(_LETTERS[(i // 26**p) % 26] for p in range(1 + i % 4)) for i in range(_VOCAB)]
)
"""Token id -> its text: one to four letters (with the space, about 3.5 characters per
token, as English text in a BPE vocabulary)."""

_TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name}: "
                + "runs the tool in the sandbox and returns its output " * 8,
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}, "path": {"type": "string"}},
                },
            },
        }
        for name in ("bash", "read", "write", "edit", "grep", "glob")
    ],
    separators=(",", ":"),
)


@dataclass(frozen=True)
class Reference:
    """What the trainer must build from one session: one merged sequence."""

    input_ids_T: list[int]
    """Every token of the session once: prompts, tool outputs and responses in order."""
    loss_mask_T: list[int]
    """1 on sampled tokens."""
    logprobs_T: list[float]
    """The sampled tokens' logprobs, 0.0 elsewhere."""


@dataclass(frozen=True)
class CliSession:
    """One session's plan: ``steps`` turns growing from ``system_tokens`` to ``context``
    tokens of prompt + response, a quarter of each turn's new tokens sampled."""

    session_id: str
    task: t.Task
    rollout_index: int = 0
    group_size: int = 1
    steps: int = 200
    context: int = 100_000
    system_tokens: int = 20_000
    answer: str = "56"
    seed: int = 0
    run_id: str = "run-1"

    def _turns(self) -> Iterator[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]]:
        """``(new prompt tokens, response tokens)`` per step (the first's new prompt
        tokens are the whole system prompt)."""
        rng = np.random.default_rng(self.seed)
        per_step = (self.context - self.system_tokens) // self.steps
        resp_n = max(1, per_step // 4)
        for k in range(self.steps):
            new_n = self.system_tokens if k == 0 else per_step - resp_n
            yield (
                rng.integers(0, _VOCAB, new_n, dtype=np.int32),
                rng.integers(0, _VOCAB, resp_n, dtype=np.int32),
            )

    @staticmethod
    def _logprobs(response: npt.NDArray[np.int32]) -> npt.NDArray[np.float32]:
        return -((response % 97).astype(np.float32) + 1) / 64

    @property
    def num_tokens(self) -> int:
        """Tokens in the session, each counted once (its last prompt + response)."""
        return sum(len(p) + len(r) for p, r in self._turns())

    def events(self) -> Iterator[t.SessionEvent]:
        """Open, the steps, close: each step delta-encoded against the previous one."""
        yield from envelopes(self._payloads(), self.session_id, self.run_id, "long-session")

    def _payloads(self) -> Iterator[t.SessionPayload]:
        yield t.SessionOpened(
            task=self.task,
            rollout_index=self.rollout_index,
            group_size=self.group_size,
            agent="synthetic-cli",
        )
        head, tail = '{"model":"m","messages":[', f'],"tools":{_TOOLS},"temperature":1.0}}'
        history = ""
        context = 0
        for k, (new, response) in enumerate(self._turns()):
            if k == 0:
                history = _message("system", new) + "," + _message("user", new[:50])
            else:
                history += "," + _message("tool", new)
            text = self.answer if k == self.steps - 1 else " ".join(_WORDS[response])
            yield t.StepCaptured(
                step_id=f"{self.session_id}/s{k}",
                step_index=k,
                parent_step_id=f"{self.session_id}/s{k - 1}" if k else None,
                api=t.ApiKind.CHAT,
                model="m",
                request_json=head + history + tail,
                response_json=chat_response(text),
                prompt_token_ids=pack_tokens(new),
                prompt_prefix_len=context,
                response_token_ids=pack_tokens(response),
                response_logprobs=pack_logprobs(self._logprobs(response)),
                sampling_params_json='{"temperature":1.0}',
                started_at=T0 + timedelta(seconds=k),
            )
            history += "," + json.dumps({"role": "assistant", "content": text})
            context += len(new) + len(response)
        yield t.SessionClosed(
            status=t.SessionStatus.OK,
            output_json=json.dumps(self.answer),
            num_steps=self.steps,
        )

    def reference(self) -> Reference:
        """The merged sequence, from the plan: no prompt is restored to build it."""
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        for new, response in self._turns():
            ids += new.tolist() + response.tolist()
            mask += [0] * len(new) + [1] * len(response)
            logprobs += [0.0] * len(new) + self._logprobs(response).tolist()
        return Reference(ids, mask, logprobs)


def _message(role: str, tokens: npt.NDArray[np.int32]) -> str:
    return json.dumps({"role": role, "content": " ".join(_WORDS[tokens])})
