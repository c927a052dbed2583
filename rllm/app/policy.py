"""Which policy an eval measures, by name: ``base`` (the weights the model server started
with), ``latest`` (the newest policy a training run published) or ``RUN:VERSION`` (one
published checkpoint), resolved against ``rllm.policy-updates``. A run or version never
published, or whose checkpoint is gone, is refused naming what there is.
``rllm.app.hold`` has the stack serve the choice for an eval.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from rllm.errors import ConfigError
from rllm.schemas.lineage import BASE, PolicyPointer, advance, base_record
from rllm.schemas.policy import PolicyUpdated

__all__ = [
    "PolicyChoice",
    "current_pointer",
    "describe",
    "parse_policy",
    "record_of",
    "resolve_policy",
]

_POLICY = re.compile(r"^(?P<run>.+):(?P<version>\d+)$")


@dataclass(frozen=True)
class PolicyChoice:
    """A policy asked for by name."""

    text: str
    """As given: ``base``, ``latest`` or ``RUN:VERSION``."""
    pointer: PolicyPointer | None = None
    """The run and version of ``RUN:VERSION`` (None for ``base`` and ``latest``)."""


def parse_policy(text: str) -> PolicyChoice:
    """``base``, ``latest`` or ``RUN:VERSION`` (the run may hold ``:``; the version is the
    part after the last one).

    Raises:
        ConfigError: anything else, naming the value.
    """
    if text in ("base", "latest"):
        return PolicyChoice(text)
    found = _POLICY.match(text)
    if found is None:
        raise ConfigError(
            f"policy {text!r} is not base, latest or RUN:VERSION (e.g. train-1a2b:3); "
            f"`rllm-cli checkpoints ls` lists the runs and versions"
        )
    return PolicyChoice(text, PolicyPointer(found["run"], int(found["version"])))


def current_pointer(records: Sequence[PolicyUpdated]) -> PolicyPointer | None:
    """What the fleet serves after ``records`` (the log, in order): the lineage rule's
    pointer; None when nothing was published (the base weights)."""
    pointer: PolicyPointer | None = None
    for rec in records:
        pointer = advance(pointer, rec)
    return pointer


def _on_disk(record: PolicyUpdated) -> bool:
    """Whether a checkpoint on a file system is still there (one elsewhere is assumed)."""
    uri = urlparse(record.checkpoint_uri)
    if uri.scheme not in ("", "file"):
        return True
    return Path(unquote(uri.path) if uri.scheme else record.checkpoint_uri).is_dir()


def resolve_policy(
    choice: PolicyChoice,
    records: Sequence[PolicyUpdated],
    exists: Callable[[PolicyUpdated], bool] = _on_disk,
) -> PolicyUpdated:
    """The record that names ``choice`` in the log ``records``: ``base_record()`` for
    ``base``; for ``latest`` the training runs' record created last (the base weights when
    there is none); for ``RUN:VERSION`` that version's record, if ``exists`` says its
    checkpoint is still there.

    Raises:
        ConfigError: the run or the version was never published, or its checkpoint is
            gone, naming it and listing what can be chosen.
    """
    if choice.text == "base":
        return base_record()
    trained = [r for r in records if r.run_id]
    if choice.pointer is None:
        return max(trained, key=lambda r: r.created_at) if trained else base_record()
    want = choice.pointer
    found = [r for r in trained if PolicyPointer.of(r) == want]
    if found and exists(found[-1]):
        return found[-1]
    kept = [r for r in trained if exists(r)]
    if not found:
        of_run = sorted({r.version for r in kept if r.run_id == want.run_id})
        what = (
            f"run {want.run_id!r} published no version {want.version} (it has {_versions(of_run)})"
            if of_run
            else f"no run {want.run_id!r} published a policy"
        )
    else:
        what = (
            f"run {want.run_id!r} version {want.version}'s checkpoint "
            f"{found[-1].checkpoint_uri} is gone (pruned?)"
        )
    raise ConfigError(f"policy {choice.text}: {what}; {_choices(kept)}")


def _versions(versions: Sequence[int]) -> str:
    return ", ".join(f"v{v}" for v in versions)


def _choices(kept: Sequence[PolicyUpdated]) -> str:
    runs: dict[str, set[int]] = {}
    for r in kept:
        runs.setdefault(r.run_id, set()).add(r.version)
    if not runs:
        return "no training run's checkpoint can be served: choose base"
    listed = "; ".join(f"{run}: {_versions(sorted(v))}" for run, v in sorted(runs.items()))
    return f"choose base, latest, or RUN:VERSION of {listed}"


def describe(pointer: PolicyPointer) -> str:
    """A policy for people: ``the base weights``, ``run r version 3``."""
    if pointer == BASE:
        return "the base weights"
    return f"run {pointer.run_id} version {pointer.version}"


def record_of(records: Sequence[PolicyUpdated], pointer: PolicyPointer | None) -> PolicyUpdated:
    """The last record naming ``pointer`` (the base record for None or the base)."""
    if pointer is None or pointer == BASE:
        return base_record()
    return next(r for r in reversed(records) if PolicyPointer.of(r) == pointer)
