"""What every backend's sandbox class shares (local, docker and the hosted ones): its spec,
and ``Sandbox.exec``'s keyword signature, checked open and handed on as one request."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from rllm.sandboxes.types import ExecResult, SandboxSpec

__all__ = ["ExecRequest", "SandboxBase"]


class ExecRequest(NamedTuple):
    """The arguments of one ``Sandbox.exec`` call (see there)."""

    cmd: str | Sequence[str]
    cwd: str | None
    env: Mapping[str, str] | None
    timeout_s: float | None
    user: str | None
    stdin: bytes | str | None


class SandboxBase(ABC):
    """The shared part of a sandbox class (see ``types.Sandbox``); a backend's class
    supplies its id, its closed check and ``_exec``."""

    _spec: SandboxSpec

    @property
    @abstractmethod
    def id(self) -> str:
        """The backend's id for it."""

    @property
    def spec(self) -> SandboxSpec:
        """What it was created from."""
        return self._spec

    @abstractmethod
    def _check_open(self) -> None:
        """Raise ``SandboxClosedError`` once it is closed (or gone)."""

    @abstractmethod
    async def _exec(self, request: ExecRequest) -> ExecResult:
        """Run one command in the open sandbox; see ``Sandbox.exec``."""

    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
    ) -> ExecResult:
        """Run ``cmd``; a failing, timed-out or orphaned command is a result (see
        ``Sandbox.exec``)."""
        self._check_open()
        return await self._exec(ExecRequest(cmd, cwd, env, timeout_s, user, stdin))
