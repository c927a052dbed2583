"""Which policy the fleet serves, read from ``rllm.policy-updates`` in log order.

The served policy is the most recently published run's newest version: a record of a
different run than the current one takes over (a new training run started, and announced
its base weights as version 0); a record of the current run counts only when its version is
higher (a restarted trainer re-announces the version it resumed from). The model server and
the gateway both follow this rule, so they agree on what "version N" means. A record of run
"" (``base_record``) points them back at the weights the server started with; an eval that
chooses its policy publishes the records ``switch_records`` gives.
"""

from __future__ import annotations

from dataclasses import dataclass

from rllm.schemas.policy import PolicyUpdated

__all__ = ["BASE", "POLICY_HEADER", "PolicyPointer", "advance", "base_record", "switch_records"]

POLICY_HEADER = "x-rllm-policy-version"
"""Response header of the local model server: the policy version whose weights generated
the answer (the gateway stamps captured steps with it)."""


@dataclass(frozen=True)
class PolicyPointer:
    """A run and one of its policy versions."""

    run_id: str
    version: int

    @classmethod
    def of(cls, record: PolicyUpdated) -> PolicyPointer:
        """The pointer a PolicyUpdated names."""
        return cls(record.run_id, record.version)

    def superseded_by(self, record: PolicyUpdated) -> bool:
        """Whether ``record``, read after this pointer's record, becomes the served policy."""
        return record.run_id != self.run_id or record.version > self.version


def advance(current: PolicyPointer | None, record: PolicyUpdated) -> PolicyPointer:
    """The pointer after reading ``record``."""
    if current is None or current.superseded_by(record):
        return PolicyPointer.of(record)
    return current


BASE = PolicyPointer("", 0)
"""The weights a model server started with (no run's checkpoint)."""


def base_record() -> PolicyUpdated:
    """The record that points the fleet back at its base weights: run "", version 0, no
    checkpoint (the model server reloads what it started with)."""
    return PolicyUpdated(event_id="base/v0", run_id="", version=0, checkpoint_uri="")


def switch_records(current: PolicyPointer | None, target: PolicyUpdated) -> list[PolicyUpdated]:
    """What to publish, in order, after the log's ``current`` pointer (None: nothing
    published, the base weights) so that the rule points at ``target``: nothing when it
    does already; ``target`` when it takes over; the base record first when ``target`` is an
    older version of the current run (which alone would not count)."""
    now = current or BASE
    if PolicyPointer.of(target) == now:
        return []
    if now.superseded_by(target):
        return [target]
    return [base_record(), target]
