"""The policy-sync contract: tell a model server to serve a policy, and ask what it serves.

One ``PolicySync`` per kind of server (``SyncKind``): our model server follows
``rllm.policy-updates`` itself and reports its policy on ``/health``; vLLM and SGLang are
told to load the checkpoint a ``PolicyUpdated`` names, through their documented routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from rllm.producers.gateway.settings import SyncKind, WeightsKind
from rllm.schemas.lineage import PolicyPointer

__all__ = ["Checkpoint", "PolicySync", "Served", "SyncKind", "WeightsKind", "confirming"]


@dataclass(frozen=True)
class Checkpoint:
    """A policy to serve, where the model server reads it."""

    pointer: PolicyPointer
    """The run and version."""
    path: str
    """The checkpoint folder as the server sees it."""
    lora: bool
    """Whether it is a LoRA adapter (else full weights)."""

    @property
    def adapter_name(self) -> str:
        """The name a LoRA adapter is loaded and requested under: ``<run>-v<version>``."""
        return f"{self.pointer.run_id}-v{self.pointer.version}"

    @property
    def folder(self) -> str:
        """The folder's last part (``v000003``)."""
        return PurePosixPath(self.path).name


@dataclass(frozen=True)
class Served:
    """What a server serves, as it confirmed."""

    pointer: PolicyPointer
    """The run and version."""
    model: str | None = None
    """The ``model`` requests name to get it (a LoRA adapter), None: the one they name."""
    reported: bool = True
    """Whether the server said so itself (a read-back), not only acknowledged a load."""


class PolicySync(Protocol):
    """Gets a policy served by one model server."""

    kind: SyncKind

    async def load(self, checkpoint: Checkpoint) -> Served | None:
        """Tell the server to serve ``checkpoint``; return once it confirms (None: it
        loads on its own, ask ``serving`` until it reports it).

        Raises:
            PolicyLoadRefused: the server refused or failed the load (the reason it gave).
            httpx.HTTPError: it could not be reached (the load is tried again).
        """
        ...

    async def serving(self) -> tuple[bool, Served | None]:
        """``(answered, served)``: the policy the server reports serving; None when it
        answered without one; not ``answered`` when it could not be asked."""
        ...


def confirming(answer: tuple[bool, Served | None], pointer: PolicyPointer) -> Served | None:
    """What ``answer`` (a ``serving()`` after a load) reports when that is ``pointer``, the
    read-back that confirms the load; None when the server could not be asked, answered
    without a policy, or reports another one."""
    answered, served = answer
    return served if answered and served is not None and served.pointer == pointer else None
