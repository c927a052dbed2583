"""One docker sandbox: a container kept alive by a ``sleep`` for its lifetime, commands
run by ``docker exec``, files moved as tar archives, snapshots taken by ``commit``."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rllm.sandboxes.base import ExecRequest, SandboxBase
from rllm.sandboxes.docker.client import docker_errors, remove_container
from rllm.sandboxes.docker.exec import (
    EXEC_ID_ENV,
    KILL_SCRIPT,
    STDIN_DIR,
    Output,
    close_socket,
    command_argv,
    in_thread,
    read_output,
    stdin_argv,
)
from rllm.sandboxes.docker.files import dir_tar, extract_dir, file_tar, single_file
from rllm.sandboxes.errors import SandboxClosedError, SandboxError, SnapshotError
from rllm.sandboxes.types import ExecResult, SandboxSpec, SnapshotInfo

__all__ = ["Call", "DockerSandbox"]

Call = Callable[..., Awaitable[Any]]
"""Runs a blocking SDK call off the event loop: ``await call(fn, *args, **kwargs)``."""

_KILL_GRACE_S = 5.0


class DockerSandbox(SandboxBase):
    """A running container of the docker backend (the ``Sandbox`` protocol)."""

    def __init__(
        self,
        client: Any,
        container_id: str,
        spec: SandboxSpec,
        call: Call,
        on_snapshot: Callable[[DockerSandbox, str], Awaitable[SnapshotInfo]],
    ) -> None:
        self._client = client
        self._id = container_id
        self._spec = spec
        self._call = call
        self._on_snapshot = on_snapshot
        self._closed = False
        self._oom_kills = 0
        self.owner: tuple[int, int] | None = None
        """(uid, gid) that files written in get: the spec's user's; None is root."""
        self._background: set[asyncio.Future[Any]] = set()
        self._cleanups: list[Callable[[], None]] = []
        self._forwarder: Any = None  # a rllm.sandboxes.forward.GatewayForwarder
        self._finalizer = weakref.finalize(
            self, remove_container, client, container_id, self._cleanups
        )

    @property
    def id(self) -> str:
        """The container id."""
        return self._id

    async def forward(self, netns: str, spec: SandboxSpec) -> None:
        """Make ``spec.gateway_url`` answer on the container's loopback (``netns`` is its
        network namespace), served by this event loop; stopped at ``close``."""
        from rllm.sandboxes.forward import GatewayForwarder, gateway_address

        assert spec.gateway_url is not None  # SandboxSpec requires it for network=gateway
        target = gateway_address(spec.gateway_url)
        self._forwarder = await GatewayForwarder(netns, target).start()
        self._cleanups.append(self._forwarder.close)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"docker sandbox {self._id[:12]} is closed")

    # --- commands -----------------------------------------------------------------------
    async def _exec(self, request: ExecRequest) -> ExecResult:
        """Run a command by ``docker exec``; a timeout kills every process it started."""
        cmd, cwd, env, timeout_s, user, stdin = request
        started = time.monotonic()
        exec_tag = uuid.uuid4().hex
        argv = command_argv(cmd)
        if stdin is not None:
            stdin_path = f"{STDIN_DIR}/{exec_tag}"
            data = stdin.encode() if isinstance(stdin, str) else stdin
            archive = file_tar(stdin_path, data, 0o644, dir_mode=0o777)
            await self._put(archive, "/", "passing stdin")
            argv = stdin_argv(argv, stdin_path)
        environment = {**(env or {}), EXEC_ID_ENV: exec_tag}
        api = self._client.api
        try:
            with docker_errors(f"exec in docker sandbox {self._id[:12]}"):
                exec_id = (
                    await self._call(
                        api.exec_create,
                        self._id,
                        argv,
                        environment=environment,
                        workdir=cwd or self._spec.workdir,
                        user=user or self._spec.user or "",
                    )
                )["Id"]
                sock = await self._call(api.exec_start, exec_id, socket=True)
        except SandboxError as exc:
            return await self._failed(str(exc), started)
        reader = in_thread(read_output, sock, self._spec.output_limit_bytes)
        try:
            done, _ = await asyncio.wait({reader}, timeout=timeout_s)
            timed_out = not done
            if timed_out:
                await self._kill_tree(exec_tag)
                await asyncio.wait({reader}, timeout=_KILL_GRACE_S)
        except asyncio.CancelledError:  # the caller gave up: its processes go too
            close_socket(sock)
            killer = asyncio.ensure_future(self._kill_tree(exec_tag))
            self._background.add(killer)
            killer.add_done_callback(self._background.discard)
            raise
        close_socket(sock)
        output: Output = await reader
        return await self._result(exec_id, output, started, timed_out, timeout_s)

    async def _result(
        self, exec_id: str, output: Output, started: float, timed_out: bool, timeout_s: float | None
    ) -> ExecResult:
        error: str | None = None
        exit_code: int | None = None
        with contextlib.suppress(SandboxError), docker_errors("exec inspect"):
            exit_code = (await self._call(self._client.api.exec_inspect, exec_id)).get("ExitCode")
        died = await self._died()
        if timed_out:
            exit_code, error = (
                None,
                f"timed out after {timeout_s:g} s; killed it and all it started",
            )
        elif died:
            exit_code, error = None, f"sandbox died: {died}"
        elif exit_code == 137 and self._spec.memory_mb and await self._oom_killed():
            error = f"killed by the out-of-memory killer at the {self._spec.memory_mb} MB limit"
        return ExecResult(
            stdout=output.stdout.text(),
            stderr=output.stderr.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            truncated=output.truncated,
            error=error,
        )

    async def _failed(self, reason: str, started: float) -> ExecResult:
        died = await self._died()
        error = f"sandbox died: {died}" if died else reason
        return ExecResult("", "", None, False, time.monotonic() - started, error=error)

    async def _died(self) -> str | None:
        """Why the container is no longer running, or None while it runs."""
        try:
            with docker_errors("inspect"):
                state = (await self._call(self._client.api.inspect_container, self._id))["State"]
        except SandboxClosedError:
            return f"container {self._id[:12]} was removed"
        except SandboxError as exc:
            return str(exc)
        if state.get("Running"):
            return None
        oom = " (out of memory)" if state.get("OOMKilled") else ""
        status, code = state.get("Status"), state.get("ExitCode")
        return f"container {self._id[:12]} {status}, exit code {code}{oom}"

    async def _oom_killed(self) -> bool:
        counters = "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events"
        result = await self._quiet_exec(["/bin/sh", "-c", f"{counters} 2>/dev/null"])
        kills = [
            int(line.split()[1]) for line in result.splitlines() if line.startswith("oom_kill ")
        ]
        total = max(kills, default=0)
        before, self._oom_kills = self._oom_kills, total
        return total > before

    async def _quiet_exec(self, argv: list[str]) -> str:
        """Run a helper command as root; its stdout ('' when it cannot run)."""
        try:
            with docker_errors("helper exec"):
                result = await self._call(
                    self._client.api.exec_create, self._id, argv, user="root", workdir="/"
                )
                raw = await self._call(self._client.api.exec_start, result["Id"])
        except SandboxError:
            return ""
        return bytes(raw).decode("utf-8", "replace")

    async def _kill_tree(self, exec_tag: str) -> None:
        await self._quiet_exec(["/bin/sh", "-c", KILL_SCRIPT, "rllm-kill", exec_tag])

    # --- files --------------------------------------------------------------------------
    async def _put(self, data: Any, path: str, what: str) -> None:
        self._check_open()
        with docker_errors(f"{what} into docker sandbox {self._id[:12]}"):
            ok = await self._call(self._client.api.put_archive, self._id, path, data)
        if not ok:
            raise SandboxError(f"{what}: docker refused the archive for {path}")

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file inside the sandbox (parents created)."""
        full = posixpath.join(self._spec.workdir, path)
        payload = data.encode() if isinstance(data, str) else data
        await self._put(file_tar(full, payload, mode, self.owner), "/", f"writing {full}")

    async def _archive(self, path: str) -> Any:
        self._check_open()
        import docker  # type: ignore[import-untyped]  # the SDK ships no type hints

        try:
            chunks, _stat = await self._call(self._client.api.get_archive, self._id, path)
        except docker.errors.NotFound as exc:
            if "No such container" in str(exc.explanation):
                raise SandboxClosedError(f"docker sandbox {self._id[:12]} is gone") from exc
            raise FileNotFoundError(f"{path} does not exist in the sandbox") from exc
        return chunks

    async def read_file(self, path: str) -> bytes:
        """Read a file inside the sandbox; ``FileNotFoundError`` when it is not there."""
        full = posixpath.join(self._spec.workdir, path)
        for _ in range(16):  # follow symbolic links, as reading the path in it would
            chunks = await self._archive(full)
            data, link = await self._call(single_file, chunks, full)
            if link is None:
                return bytes(data)
            full = posixpath.normpath(posixpath.join(posixpath.dirname(full), link))
        raise OSError(f"{path}: too many levels of symbolic links in the sandbox")

    async def upload_dir(self, local: Path, remote: str) -> None:
        """Copy a host directory's contents into ``remote`` (created)."""
        if not local.is_dir():
            raise NotADirectoryError(f"{local} is not a directory on the host")
        full = posixpath.join(self._spec.workdir, remote)
        archive = await self._call(dir_tar, local, full, self.owner)
        try:
            await self._put(archive, "/", f"uploading {local}")
        finally:
            archive.close()

    async def download_dir(self, remote: str, local: Path) -> None:
        """Copy ``remote``'s contents into a host directory (created), staying inside it."""
        full = posixpath.join(self._spec.workdir, remote)
        chunks = await self._archive(full.rstrip("/") or "/")
        await self._call(extract_dir, chunks, local)

    # --- lifecycle ----------------------------------------------------------------------
    async def is_alive(self) -> bool:
        """Whether the container still runs."""
        return not self._closed and await self._died() is None

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Commit the container's filesystem as an image; register it as ``name``."""
        self._check_open()
        if await self._died() is not None:
            raise SnapshotError(
                f"cannot snapshot docker sandbox {self._id[:12]}: it is not running"
            )
        return await self._on_snapshot(self, name)

    async def close(self) -> None:
        """Remove the container (and its forwarder). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._forwarder is not None:
            with contextlib.suppress(Exception):
                await self._forwarder.aclose()
        await self._call(self._finalizer)
