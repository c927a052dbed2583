"""Which policy the fleet serves, read from ``rllm.policy-updates`` in log order.

The served policy is the most recently published run's newest version: a record of a
different run than the current one takes over (a new training run started, and announced
its base weights as version 0); a record of the current run counts only when its version is
higher (a restarted trainer re-announces the version it resumed from). The model server and
the gateway both follow this rule, so they agree on what "version N" means.
"""

from __future__ import annotations

from dataclasses import dataclass

from rllm.schemas.types import PolicyUpdated

__all__ = ["POLICY_HEADER", "PolicyPointer", "advance"]

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
