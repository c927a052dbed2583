"""Prefix-delta steps: the one rule that carries a session's tokens and requests once.

Every component encodes and restores steps through this module (gateway, processors,
trainer, replay), on pydantic ``StepCaptured`` models and on their Avro-shaped dicts alike.

Prompt tokens (every topic): a step with ``prompt_prefix_len = k > 0`` stores only the
suffix; its full prompt is the first ``k`` tokens of (its parent's full prompt + the
parent's response) followed by ``prompt_token_ids``. The parent is ``parent_step_id``
(matched by key) and comes earlier in ``step_index`` order. Token arrays are packed
``<i4`` bytes, so restoring is byte slicing.

Request JSON (``rllm.trajectories`` and ``rllm.episodes``; the gateway writes full
requests on ``rllm.session-events``): a step with ``request_prefix_len = p`` and/or
``request_suffix_len = s`` stores only the middle of its request; the full request is
``prev[:p] + request_json + prev[len(prev) - s:]``, where ``prev`` is the full
``request_json`` of the step before it in ``steps`` (lengths in Unicode code points).
A CLI agent resends its whole history each turn with the tools after the messages, so
prefix and suffix together cover all but the new messages.

Both restorations stream: only the parents still referenced later are kept, so a
session of N steps is restored in memory linear in its longest prompt.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rllm.schemas.tokens import unpack_tokens

if TYPE_CHECKING:
    from rllm.schemas.types import StepCaptured

__all__ = [
    "MIN_REQUEST_REUSE",
    "TOKEN_BYTES",
    "common_prefix_len",
    "delta_prompt",
    "encode_step_dicts",
    "full_prompts",
    "full_requests",
    "request_delta",
    "restore_step_dicts",
    "restore_steps",
    "unrestorable_prompts",
]

TOKEN_BYTES = 4
"""Bytes per packed token ID (``<i4``)."""

MIN_REQUEST_REUSE = 256
"""A request is delta-encoded only when it reuses at least this many code points of the
previous one (smaller requests stay whole: nothing worth saving)."""

_CHUNK = 4096

Step = Any
"""A ``StepCaptured`` or its Avro-shaped dict."""


def _get(step: Step, name: str) -> Any:
    return step[name] if isinstance(step, Mapping) else getattr(step, name)


# prompt tokens --------------------------------------------------------------------------


def common_prefix_len(a: npt.NDArray[np.int32], b: npt.NDArray[np.int32]) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def delta_prompt(
    previous_full: npt.NDArray[np.int32], prompt: npt.NDArray[np.int32]
) -> tuple[int, npt.NDArray[np.int32]]:
    """``(prefix_len, suffix)``: the prompt as reused tokens of the parent plus a suffix."""
    k = common_prefix_len(previous_full, prompt)
    return k, prompt[k:]


def _walk(steps: Sequence[Step]) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Per step in order: its full prompt and its parent's full prompt + response (None
    where unknown: no parent, a parent not seen before it, or one that could not be
    restored). A parent is kept only until the last step that names it."""
    last_use: dict[str, int] = {}
    for i, step in enumerate(steps):
        parent = _get(step, "parent_step_id")
        if parent:
            last_use[parent] = i
    kept: dict[str, bytes] = {}
    for i, step in enumerate(steps):
        parent_id = _get(step, "parent_step_id") or ""
        parent = kept.get(parent_id)
        stored: bytes = _get(step, "prompt_token_ids")
        need = _get(step, "prompt_prefix_len") * TOKEN_BYTES
        prompt: bytes | None = stored
        if need > 0:
            prompt = None if parent is None or len(parent) < need else parent[:need] + stored
        step_id = _get(step, "step_id")
        if prompt is not None and last_use.get(step_id, -1) > i:
            kept[step_id] = prompt + _get(step, "response_token_ids")
        if last_use.get(parent_id) == i:
            kept.pop(parent_id, None)
        yield prompt, parent


def full_prompts(steps: Sequence[Step]) -> Iterator[bytes | None]:
    """The full prompt (packed ``<i4``) of each step, in order; None for a step whose
    parent is missing, comes later, is unrestorable or is shorter than its prefix.

    Args:
        steps: a session's steps in ``step_index`` order.
    """
    for prompt, _ in _walk(steps):
        yield prompt


def unrestorable_prompts(steps: Sequence[Step]) -> list[str]:
    """Ids of the steps whose full prompt cannot be restored, from lengths alone (no
    token is copied): the check a consumer makes before it trusts the deltas."""
    full_len: dict[str, int] = {}
    bad: list[str] = []
    for step in steps:
        k = _get(step, "prompt_prefix_len")
        if k > 0 and full_len.get(_get(step, "parent_step_id") or "", -1) < k:
            bad.append(_get(step, "step_id"))
            continue
        n = k + (len(_get(step, "prompt_token_ids")) + len(_get(step, "response_token_ids"))) // 4
        full_len[_get(step, "step_id")] = n
    return bad


# request JSON ---------------------------------------------------------------------------


def _prefix_len(a: str, b: str) -> int:
    """Longest common prefix of two strings: whole chunks compared first (each a
    memcmp), then a binary search inside the first chunk that differs."""
    n, lo = min(len(a), len(b)), 0
    while lo < n and a[lo : lo + _CHUNK] == b[lo : lo + _CHUNK]:
        lo += _CHUNK
    if lo >= n:
        return n
    hi = min(lo + _CHUNK, n)  # a[:lo] == b[:lo]; the answer lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def request_delta(previous: str, request: str) -> tuple[int, int, str]:
    """``(prefix_len, suffix_len, middle)`` of ``request`` against ``previous``: the
    longest common prefix, then the longest common suffix of what remains.

    ``previous[:prefix_len] + middle + previous[len(previous) - suffix_len:]`` is
    ``request``; ``(0, 0, request)`` when less than ``MIN_REQUEST_REUSE`` is shared.
    """
    p = _prefix_len(previous, request)
    room = min(len(previous), len(request)) - p
    tail_a, tail_b = previous[len(previous) - room :], request[len(request) - room :]
    s = _prefix_len(tail_a[::-1], tail_b[::-1]) if room > 0 else 0
    if p + s < MIN_REQUEST_REUSE:
        return 0, 0, request
    return p, s, request[p : len(request) - s]


def full_requests(steps: Sequence[Step]) -> Iterator[str | None]:
    """The full ``request_json`` of each step, in order; None for a delta whose previous
    step is absent or unrestorable, or whose lengths exceed it.

    Args:
        steps: a trajectory's steps in ``step_index`` order.
    """
    prev: str | None = None
    for step in steps:
        p, s = _get(step, "request_prefix_len"), _get(step, "request_suffix_len")
        stored: str = _get(step, "request_json")
        text: str | None = stored
        if p or s:
            if prev is None or p < 0 or s < 0 or p + s > len(prev):
                text = None
            else:
                text = prev[:p] + stored + prev[len(prev) - s :]
        prev = text
        yield text


# whole steps ----------------------------------------------------------------------------


def restore_steps(steps: Sequence[StepCaptured]) -> tuple[list[StepCaptured], list[str]]:
    """Steps with full prompts and requests (``prompt_prefix_len``, ``request_prefix_len``
    and ``request_suffix_len`` 0).

    Args:
        steps: a session's steps in ``step_index`` order.

    Returns:
        The steps and flags: ``unrestored_prompt`` / ``unrestored_request`` when a parent
        is missing or too short (that part of the step stays as it came).
    """
    out: list[StepCaptured] = []
    flags: set[str] = set()
    for step, prompt, request in zip(steps, full_prompts(steps), full_requests(steps), strict=True):
        update: dict[str, Any] = {}
        if prompt is None:
            flags.add("unrestored_prompt")
        elif step.prompt_prefix_len:
            update |= {"prompt_token_ids": prompt, "prompt_prefix_len": 0}
        if request is None:
            flags.add("unrestored_request")
        elif step.request_prefix_len or step.request_suffix_len:
            update |= {"request_json": request, "request_prefix_len": 0, "request_suffix_len": 0}
        out.append(step.model_copy(update=update) if update else step)
    return out, sorted(flags)


def restore_step_dicts(steps: Sequence[MutableMapping[str, Any]]) -> list[str]:
    """``restore_steps`` on Avro-shaped step dicts, in place; returns the flags."""
    flags: set[str] = set()
    prompts, requests = list(full_prompts(steps)), list(full_requests(steps))
    for step, prompt, request in zip(steps, prompts, requests, strict=True):
        if prompt is None:
            flags.add("unrestored_prompt")
        else:
            step["prompt_token_ids"], step["prompt_prefix_len"] = prompt, 0
        if request is None:
            flags.add("unrestored_request")
        else:
            step["request_json"] = request
            step["request_prefix_len"] = step["request_suffix_len"] = 0
    return sorted(flags)


def encode_step_dicts(steps: Sequence[MutableMapping[str, Any]]) -> list[str]:
    """Delta-encode Avro-shaped step dicts in place (the inverse of ``restore_step_dicts``,
    which gives back the same bytes).

    A full prompt whose step names a parent keeps only what follows the longest common
    prefix with the parent's prompt + response (a step without ``parent_step_id`` stays
    whole); a delta prompt stays as it came. Each request becomes its delta against the
    previous step's full request (``request_delta``). Encoding twice changes nothing.

    Returns:
        Flags, as ``restore_step_dicts``: the parts that could not be restored stay as
        they came.
    """
    flags: set[str] = set()
    walk, requests = _walk(steps), list(full_requests(steps))
    prev: str | None = None
    for step, (prompt, parent), request in zip(steps, walk, requests, strict=True):
        if prompt is None:
            flags.add("unrestored_prompt")
        elif step["prompt_prefix_len"] == 0 and parent:
            k, _ = delta_prompt(unpack_tokens(parent), unpack_tokens(prompt))
            if k:
                step["prompt_token_ids"] = prompt[k * TOKEN_BYTES :]
                step["prompt_prefix_len"] = k
        if request is None:
            flags.add("unrestored_request")
        elif prev is not None:
            p, s, middle = request_delta(prev, request)
            step["request_json"], step["request_prefix_len"], step["request_suffix_len"] = (
                middle,
                p,
                s,
            )
        prev = request
    return sorted(flags)
