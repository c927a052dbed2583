"""A ``modal.Sandbox`` of the modal fake and what hangs off it: the exec'd process, its
streams, and the sandbox's filesystem (see ``modal.py``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import modal.exception

from rllm.sandboxes.types import Sandbox

if TYPE_CHECKING:
    from tests.fakes_sandboxes.modal import FakeApp, FakeModal

__all__ = ["FakeFilesystem", "FakeProcess", "FakeSandbox", "FakeStreamReader", "aio"]

T = TypeVar("T")


class _Aio(Generic[T]):
    """A method of the fake: awaitable through ``.aio`` (the blocking form is not faked)."""

    def __init__(self, fn: Callable[..., T]) -> None:
        self.aio = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the modal fake has only the .aio forms; call .aio(...)")


def aio(fn: Callable[..., T]) -> _Aio[T]:
    return _Aio(fn)


class FakeStreamReader:
    """``modal.io_streams.StreamReader`` over a finished process's output."""

    def __init__(self, data: str) -> None:
        async def read() -> str:
            return data

        self.read = aio(read)


class FakeProcess:
    """``modal.container_process.ContainerProcess`` of one finished exec."""

    def __init__(self, stdout: str, stderr: str, code: int) -> None:
        self.stdout = FakeStreamReader(stdout)
        self.stderr = FakeStreamReader(stderr)
        self._code = code
        self._waited = False

        async def wait() -> int:
            self._waited = True
            return code

        async def poll() -> int | None:
            return code

        self.wait = aio(wait)
        self.poll = aio(poll)

    @property
    def returncode(self) -> int:
        """The exit code, after ``wait()`` (as in Modal)."""
        if not self._waited:
            raise modal.exception.InvalidError(
                "You must call wait() before accessing the returncode."
            )
        return self._code


class FakeFilesystem:
    """``modal.sandbox.SandboxFilesystem``."""

    def __init__(self, sandbox: FakeSandbox) -> None:
        async def read_bytes(remote_path: str) -> bytes:
            engine = sandbox.live()
            try:
                return await engine.read_file(remote_path)
            except FileNotFoundError as exc:
                raise modal.exception.SandboxFilesystemNotFoundError(
                    f"{remote_path}: no such file"
                ) from exc

        async def write_bytes(data: bytes | bytearray | memoryview, remote_path: str) -> None:
            await sandbox.live().write_file(remote_path, bytes(data))

        async def make_directory(remote_path: str, *, create_parents: bool = True) -> None:
            flag = ["-p"] if create_parents else []
            result = await sandbox.live().exec(["mkdir", *flag, "--", remote_path], cwd="/")
            if not result.ok:
                raise modal.exception.SandboxFilesystemError(result.stderr.strip())

        self.read_bytes = aio(read_bytes)
        self.write_bytes = aio(write_bytes)
        self.make_directory = aio(make_directory)


class FakeSandbox:
    """``modal.Sandbox``: a real engine sandbox, ended at its ``timeout``."""

    def __init__(
        self, fake: FakeModal, engine: Sandbox, app: FakeApp, tags: dict[str, str], timeout: int
    ) -> None:
        self.object_id = f"sb-{uuid.uuid4().hex[:20]}"
        self.app_id = app.app_id
        self.engine: Sandbox | None = engine
        self.tags = dict(tags)
        self.returncode: int | None = None
        self.filesystem = FakeFilesystem(self)
        self._ender = asyncio.get_running_loop().call_later(
            timeout, lambda: fake.spawn(self._end(0))
        )
        self.exec = aio(self._exec)
        self.terminate = aio(self._terminate)
        self.poll = aio(self._poll)
        self.get_tags = aio(self._get_tags)
        self.set_tags = aio(self._set_tags)
        self.snapshot_filesystem = aio(self._snapshot_filesystem)
        self._fake = fake

    def live(self) -> Sandbox:
        """The engine sandbox; ``SandboxTerminatedError`` once ended."""
        if self.engine is None:
            raise modal.exception.SandboxTerminatedError(f"Sandbox {self.object_id} has terminated")
        return self.engine

    async def _end(self, code: int) -> None:
        self._ender.cancel()
        engine, self.engine = self.engine, None
        if engine is not None:
            self.returncode = code
            await engine.close()

    async def _exec(
        self,
        *args: str,
        timeout: int | None = None,
        workdir: str | None = None,
        env: dict[str, str | None] | None = None,
        text: bool = True,
    ) -> FakeProcess:
        if not args:
            raise modal.exception.InvalidError("exec needs a command")
        result = await self.live().exec(
            list(args),
            cwd=workdir or "/",
            env={k: v for k, v in (env or {}).items() if v is not None},
            timeout_s=float(timeout) if timeout else None,
        )
        if result.timed_out:
            return FakeProcess("", "", -1)
        code = 137 if result.exit_code is None else result.exit_code
        return FakeProcess(result.stdout, result.stderr, code)

    async def _terminate(self, *, wait: bool = False) -> int | None:
        await self._end(137)
        return self.returncode if wait else None

    async def _poll(self) -> int | None:
        return self.returncode

    async def _get_tags(self) -> dict[str, str]:
        return dict(self.tags)

    async def _set_tags(self, tags: dict[str, str], *, client: Any = None) -> None:
        self.tags = dict(tags)

    async def _snapshot_filesystem(self, timeout: int = 55, *, ttl: int | None = 2592000) -> Any:
        info = await self.live().snapshot(f"fake-modal-{uuid.uuid4().hex[:12]}")
        return self._fake.snapshot_image(info.image)
