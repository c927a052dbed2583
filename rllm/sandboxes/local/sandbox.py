"""One local sandbox: bubblewrap over an overlay root, entered by ``rllm-sandbox-enter``
for each command, its files reached confined to its root, closed at ``close``, at garbage
collection, at process exit and at the end of its lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from rllm.sandboxes.base import ExecRequest, SandboxBase
from rllm.sandboxes.errors import SandboxClosedError, SnapshotError
from rllm.sandboxes.forward import GatewayForwarder
from rllm.sandboxes.images.store import ImageConfig, ImageStore
from rllm.sandboxes.local.exec import Command, Entry, run_command
from rllm.sandboxes.local.files import SandboxFiles
from rllm.sandboxes.local.layers import copy_upper
from rllm.sandboxes.local.process import BwrapProcess
from rllm.sandboxes.local.state import SandboxState, teardown
from rllm.sandboxes.local.users import resolve_user
from rllm.sandboxes.snapshots import SnapshotRegistry
from rllm.sandboxes.types import ExecResult, SandboxSpec, SnapshotInfo

__all__ = ["LocalSandbox", "SandboxParts"]


@dataclass(frozen=True)
class SandboxParts:
    """What ``LocalBackend.create`` made for one sandbox."""

    state: SandboxState
    """Its state file's content."""
    process: BwrapProcess
    """bubblewrap and the sandbox's pid 1."""
    entry: Entry
    """How its commands enter it."""
    env: dict[str, str]
    """Environment of every command (image's, then the spec's)."""
    workdir: str
    """Its working directory."""
    user: str | None
    """Default user."""
    layer_ids: tuple[str, ...] | None
    """Its image's layers in the store, bottom first (None: a root filesystem path)."""
    store: ImageStore
    """The image store (snapshots go there)."""
    registry: SnapshotRegistry
    """The snapshot registry."""
    snapshot_ttl_s: float | None
    """TTL of its snapshots."""
    owner: tuple[int, int]
    """Host uid and gid of root inside (what files written from the host belong to)."""


def _close_now(
    state: SandboxState,
    process: BwrapProcess,
    forwarder: list[GatewayForwarder],
    files: SandboxFiles,
) -> None:
    """Sync teardown, for ``weakref.finalize`` (garbage collection, process exit)."""
    for fwd in forwarder:
        with contextlib.suppress(Exception):
            fwd.close()
    files.close()
    teardown(state, process.popen)


def _expire(ref: weakref.ref[LocalSandbox]) -> None:
    sandbox = ref()
    if sandbox is not None:
        sandbox._closing = asyncio.ensure_future(sandbox.close())


class LocalSandbox(SandboxBase):
    """A running local sandbox (see ``rllm.sandboxes.types.Sandbox``)."""

    def __init__(self, spec: SandboxSpec, parts: SandboxParts) -> None:
        self._spec = spec
        self._parts = parts
        self._files = SandboxFiles(
            f"/proc/{parts.process.init_pid}/root", hold=True, owner=parts.owner
        )
        self._forwarders: list[GatewayForwarder] = []
        self._closed = False
        self._execs = 0
        self._finalizer = weakref.finalize(
            self, _close_now, parts.state, parts.process, self._forwarders, self._files
        )
        self._expiry: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        if spec.lifetime_s is not None:  # a weak reference: the timer must not keep it alive
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(spec.lifetime_s, _expire, weakref.ref(self))

    def add_forwarder(self, forwarder: GatewayForwarder) -> None:
        """Close ``forwarder`` with the sandbox."""
        self._forwarders.append(forwarder)

    @property
    def id(self) -> str:
        """Its id (its run directory's name)."""
        return self._parts.state.id

    @property
    def init_pid(self) -> int:
        """The sandbox's pid 1 on the host (``/proc/<it>/ns/*`` are its namespaces)."""
        return self._parts.process.init_pid

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed; create a new one")
        if self._parts.process.popen.poll() is not None:
            raise SandboxClosedError(f"sandbox {self.id} is not running: {self._death()}")

    def _death(self) -> str:
        age = time.time() - self._parts.state.created_at
        lifetime = self._spec.lifetime_s
        if lifetime is not None and age >= lifetime - 0.05:
            return f"its lifetime of {lifetime:g} s ran out"
        return f"its init process ended (exit {self._parts.process.popen.returncode})"

    async def _exec(self, request: ExecRequest) -> ExecResult:
        """Run a command inside by ``rllm-sandbox-enter``."""
        cmd, cwd, env, timeout_s, user, stdin = request
        if isinstance(cmd, str):
            argv: list[str] = ["/bin/sh", "-c", cmd]
        else:
            argv = list(cmd)
            if not argv:
                raise ValueError("exec needs a command: an empty argv was given")
        try:
            identity = resolve_user(self._files, user or self._parts.user)
        except FileNotFoundError as exc:  # its pid 1 is gone: the sandbox died
            raise SandboxClosedError(f"sandbox {self.id} is not running: {exc}") from exc
        full_env = {"HOME": identity.home, **self._parts.env, **(env or {})}
        self._execs += 1
        procs, group = self._parts.state.cgroups.exec_procs(self._execs)
        command = Command(
            argv=argv,
            cwd=cwd if cwd not in (None, self._parts.workdir) else None,
            env=full_env,
            uid=identity.uid,
            gid=identity.gid,
            stdin=stdin.encode() if isinstance(stdin, str) else stdin,
            timeout_s=timeout_s,
            output_limit=self._spec.output_limit_bytes,
        )
        result = await run_command(self._parts.entry, procs, group, command)
        if result.timed_out or result.exit_code in (0, None) or result.exit_code < 128:
            return result
        for _ in range(25):  # killed by a signal: was it the whole sandbox?
            if self._parts.process.popen.poll() is not None:
                return ExecResult(
                    stdout=result.stdout,
                    stderr=result.stderr,
                    exit_code=None,
                    timed_out=False,
                    duration_s=result.duration_s,
                    truncated=result.truncated,
                    error=f"sandbox died: {self._death()}",
                )
            await asyncio.sleep(0.002)
        return result

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file inside (parents created)."""
        self._check_open()
        raw = data.encode() if isinstance(data, str) else data
        await asyncio.to_thread(self._files.write, path, raw, mode)

    async def read_file(self, path: str) -> bytes:
        """Read a file inside; ``FileNotFoundError`` when it is not there."""
        self._check_open()
        return await asyncio.to_thread(self._files.read, path)

    async def upload_dir(self, local: Path, remote: str) -> None:
        """Copy a host directory's contents into ``remote``."""
        self._check_open()
        await asyncio.to_thread(self._files.upload, Path(local), remote)

    async def download_dir(self, remote: str, local: Path) -> None:
        """Copy ``remote``'s contents into a host directory."""
        self._check_open()
        await asyncio.to_thread(self._files.download, remote, Path(local))

    async def is_alive(self) -> bool:
        """Whether it still runs."""
        return not self._closed and self._parts.process.popen.poll() is None

    async def commit_layer(self, layer_id: str | None = None) -> str:
        """Copy its writable layer into the image store; returns the layer id (an
        existing layer of ``layer_id`` is kept as it is)."""
        self._check_open()
        upper = self._parts.state.dirs.upper
        owner = self._parts.owner[0]
        return await asyncio.to_thread(copy_upper, upper, self._parts.store, layer_id, owner)

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Freeze its filesystem as image ``name`` and register the snapshot."""
        parts = self._parts
        if parts.layer_ids is None:
            raise SnapshotError(
                f"sandbox {self.id} runs on the root filesystem {self._spec.image!r}, which is "
                f"not in the image store; import it (`rllm-cli sandbox image import`) to snapshot"
            )
        layer = await self.commit_layer()
        config = ImageConfig(env=dict(parts.env), workdir=parts.workdir, user=parts.user)
        labels = {"rllm.snapshot.of": self.id}
        await asyncio.to_thread(parts.store.put, name, [*parts.layer_ids, layer], config, labels)
        info = SnapshotInfo(
            name=name,
            backend="local",
            image=name,
            ttl_s=parts.snapshot_ttl_s,
            labels=dict(self._spec.labels),
        )
        return await asyncio.to_thread(parts.registry.register, info)

    async def close(self) -> None:
        """Stop every process and remove its mount, cgroups and directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._expiry is not None:
            self._expiry.cancel()
        for forwarder in self._forwarders:
            await forwarder.aclose()
        await asyncio.to_thread(self._finalizer)
