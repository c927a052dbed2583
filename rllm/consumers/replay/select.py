"""Pure selection logic of replay: restore delta-encoded prompts (``rllm.schemas.delta``),
build examples from a session's steps, filter by reward/correctness/benchmark/model/run,
best-of-n, dedup.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from rllm.consumers.replay.types import ReplayFilter, SftExample
from rllm.schemas.delta import full_prompts
from rllm.schemas.tokens import pack_tokens, unpack_tokens

__all__ = ["SessionRecord", "messages_of", "select_examples", "session_examples"]

SessionRecord = dict[str, Any]
"""A session: run_id, session_id, task_id, benchmark, model, reward, is_correct, and
``steps``: dicts with step_id, step_index, parent_step_id, prompt_prefix_len,
prompt_token_ids / response_token_ids (packed bytes or int lists), request_json,
response_json, error_kind, token_status."""


def _packed(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return pack_tokens([int(v) for v in value or []])


def messages_of(request_json: str, response_json: str) -> list[dict[str, Any]]:
    """The request's messages (or prompt) followed by the assistant's answer."""
    req = json.loads(request_json or "{}")
    resp = json.loads(response_json or "{}")
    msgs = list(req.get("messages") or [])
    if not msgs and req.get("prompt") is not None:
        msgs = [{"role": "user", "content": req["prompt"]}]
    if not msgs and isinstance(req.get("input"), str):
        msgs = [{"role": "user", "content": req["input"]}]
    choice = (resp.get("choices") or [{}])[0]
    content = (choice.get("message") or {}).get("content", choice.get("text"))
    if content is None and isinstance(resp.get("content"), list):
        content = "".join(b.get("text", "") for b in resp["content"] if isinstance(b, dict))
    if content is not None:
        msgs.append({"role": "assistant", "content": content})
    return msgs


def session_examples(session: SessionRecord) -> list[SftExample]:
    """One example per successful step with token IDs, full prompts restored (a step
    whose parent is missing or too short is left out)."""
    steps = sorted(session["steps"], key=lambda s: s["step_index"])
    links = [
        {
            "step_id": step["step_id"],
            "parent_step_id": step.get("parent_step_id") or None,
            "prompt_prefix_len": int(step.get("prompt_prefix_len") or 0),
            "prompt_token_ids": _packed(step["prompt_token_ids"]),
            "response_token_ids": _packed(step["response_token_ids"]),
        }
        for step in steps
    ]
    out = []
    for step, link, full in zip(steps, links, full_prompts(links), strict=True):
        if full is None:
            continue  # parent missing: the full prompt cannot be restored
        failed = step.get("error_kind") or step.get("token_status", "ok") != "ok"
        if failed or not link["response_token_ids"]:
            continue
        prompt = unpack_tokens(full).tolist()
        response = unpack_tokens(link["response_token_ids"]).tolist()
        correct = session.get("is_correct")
        out.append(
            SftExample(
                session_id=session["session_id"],
                run_id=session["run_id"],
                task_id=session.get("task_id", ""),
                benchmark=session.get("benchmark", ""),
                model=step.get("model") or session.get("model", ""),
                step_index=step["step_index"],
                reward=session.get("reward"),
                is_correct=None if correct is None else bool(correct),
                messages=messages_of(
                    step.get("request_json", "{}"), step.get("response_json", "{}")
                ),
                prompt_token_ids=prompt,
                response_token_ids=response,
            )
        )
    return out


def _keep(s: SessionRecord, f: ReplayFilter) -> bool:
    reward = s.get("reward")
    return not (
        (f.min_reward is not None and (reward is None or reward < f.min_reward))
        or (f.correct_only and not s.get("is_correct"))
        or (f.benchmark and s.get("benchmark") != f.benchmark)
        or (f.model and s.get("model") != f.model)
        or (f.run and s.get("run_id") != f.run)
    )


def select_examples(sessions: Iterable[SessionRecord], f: ReplayFilter) -> list[SftExample]:
    """Apply the filter, best-of-n per (run, task), then dedup, in session order."""
    kept = [s for s in sessions if _keep(s, f)]
    if f.best_of_n is not None:
        groups: dict[tuple[str, str], list[SessionRecord]] = defaultdict(list)
        for s in kept:
            groups[(s["run_id"], s.get("task_id", ""))].append(s)
        best = {
            id(s)
            for g in groups.values()
            for s in sorted(g, key=lambda s: -(s.get("reward") or 0.0))[: f.best_of_n]
        }
        kept = [s for s in kept if id(s) in best]
    out, seen = [], set()
    for s in kept:
        for ex in session_examples(s):
            if f.dedup:
                key = hashlib.blake2b(
                    np.asarray(
                        [*ex.prompt_token_ids, -1, *ex.response_token_ids], dtype="<i4"
                    ).tobytes(),
                    digest_size=16,
                ).digest()
                if key in seen:
                    continue
                seen.add(key)
            out.append(ex)
    return out
