"""A fake of the ``modal`` SDK at its Python boundary, for the modal backend (Modal speaks
gRPC to its servers, so the fake stands where the backend meets the SDK).

It has the names and signatures of ``modal`` 1.6 that the backend calls, each with its
``.aio`` form: ``Client.from_credentials``, ``App.lookup``, ``Image.from_registry`` /
``from_id`` / ``from_dockerfile`` (+ ``build``), ``Sandbox.create`` / ``from_id`` / ``list``,
and on a sandbox ``exec`` (a process with ``stdout.read()``, ``stderr.read()``, ``wait()``,
``poll()``, ``returncode``), ``terminate``, ``poll``, ``get_tags``, ``set_tags``,
``snapshot_filesystem`` and ``filesystem`` (``read_bytes``, ``write_bytes``,
``make_directory``). Its errors are the real ``modal.exception`` classes. The unit test
``test_sdk_names`` checks every signature here against the installed SDK.

Behaviour follows Modal's documentation: a sandbox ends at its ``timeout`` (default 300 s);
an ``exec`` past its ``timeout`` is killed and its ``wait()`` returns -1; ``list`` yields
running sandboxes only, filtered by tags. Each sandbox is a real engine sandbox.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import modal.exception
from pydantic import SecretStr

from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import NetworkMode, SandboxBackend, SandboxSpec, labels_match
from tests.fakes_sandboxes.engine import DEFAULT_IMAGE, DockerfileRefused, build_dockerfile
from tests.fakes_sandboxes.modal_sandbox import FakeSandbox, aio

__all__ = ["FAKE_TOKEN", "FakeModal"]

FAKE_TOKEN = ("ak-fake-token-id", "as-fake-token-secret")
T = TypeVar("T")


def _image_id() -> str:
    return f"im-{uuid.uuid4().hex[:20]}"


class FakeClient:
    """``modal.Client``."""

    def __init__(self, token_id: str, token_secret: str) -> None:
        self.authenticated = (token_id, token_secret) == FAKE_TOKEN
        self.closed = False

        async def close() -> None:
            self.closed = True

        self.close = aio(close)


class FakeApp:
    """``modal.App`` as looked up."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.app_id = f"ap-{uuid.uuid4().hex[:20]}"


class FakeImage:
    """``modal.Image``: an engine image once built (``object_id`` then set)."""

    def __init__(self, fake: FakeModal, engine_image: str | None, dockerfile: str | None = None):
        self._fake = fake
        self.engine_image = engine_image
        self.dockerfile = dockerfile
        self.object_id: str | None = None

        async def build(app: Any = None) -> FakeImage:
            if self.engine_image is None and self.dockerfile is not None:
                name = f"fake-modal-{uuid.uuid4().hex[:12]}"
                try:
                    self.engine_image = await build_dockerfile(fake.engine, self.dockerfile, name)
                except (DockerfileRefused, LookupError) as exc:
                    raise modal.exception.ImageBuildError(str(exc), _image_id()) from exc
            fake.register_image(self)
            return self

        self.build = aio(build)


class FakeModal:
    """Stands for the ``modal`` module: ``ModalBackend(settings, sdk=FakeModal(engine))``."""

    exception = modal.exception

    def __init__(self, engine: SandboxBackend) -> None:
        self.engine = engine
        self.apps: dict[str, FakeApp] = {}
        self.images: dict[str, FakeImage] = {}
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.clients: list[FakeClient] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        """Every ``Sandbox.create`` as (app name, keyword arguments), for tests."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.Client = _ns(from_credentials=self._from_credentials)
        self.App = _ns(lookup=aio(self._lookup))
        self.Image = _ns(
            from_registry=self._from_registry,
            from_dockerfile=self._from_dockerfile,
            from_id=aio(self._image_from_id),
        )
        self.Sandbox = _ns(
            create=aio(self._create), from_id=aio(self._from_id), list=aio(self._list)
        )

    @staticmethod
    def settings_for(settings: SandboxSettings) -> SandboxSettings:
        """``settings`` with the fake's token."""
        token_id, secret = FAKE_TOKEN
        return settings.model_copy(
            update={"modal_token_id": SecretStr(token_id), "modal_token_secret": SecretStr(secret)}
        )

    def spawn(self, coro: Awaitable[None]) -> None:
        """Run ``coro`` in the background (kept until done)."""

        async def run() -> None:
            await coro

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def register_image(self, image: FakeImage) -> None:
        """Give a built image its ``im-`` id."""
        if image.object_id is None:
            image.object_id = _image_id()
        self.images[image.object_id] = image

    def snapshot_image(self, engine_image: str) -> FakeImage:
        """A registered image of an engine snapshot (``snapshot_filesystem``)."""
        image = FakeImage(self, engine_image)
        self.register_image(image)
        return image

    def live(self) -> list[FakeSandbox]:
        """Sandboxes still running."""
        return [s for s in self.sandboxes.values() if s.engine is not None]

    async def shutdown(self) -> None:
        """End every sandbox still running and the engine."""
        for sandbox in self.live():
            await sandbox._end(137)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.engine.aclose()

    def _check(self, client: Any) -> None:
        if not isinstance(client, FakeClient) or not client.authenticated or client.closed:
            raise modal.exception.AuthError("Token ID or secret is invalid")

    # --- Client, App, Image -----------------------------------------------------------
    def _from_credentials(self, token_id: str, token_secret: str) -> FakeClient:
        client = FakeClient(token_id, token_secret)
        self.clients.append(client)
        return client

    async def _lookup(
        self,
        name: str,
        *,
        client: Any = None,
        environment_name: str | None = None,
        create_if_missing: bool = False,
    ) -> FakeApp:
        self._check(client)
        if name not in self.apps:
            if not create_if_missing:
                raise modal.exception.NotFoundError(f"App '{name}' not found")
            self.apps[name] = FakeApp(name)
        return self.apps[name]

    def _from_registry(
        self, tag: str, secret: Any = None, *, force_build: bool = False
    ) -> FakeImage:
        return FakeImage(self, tag)

    def _from_dockerfile(
        self, path: str | Path, *, force_build: bool = False, context_dir: Path | str | None = None
    ) -> FakeImage:
        return FakeImage(self, None, dockerfile=Path(path).read_text())

    async def _image_from_id(self, image_id: str, client: Any = None) -> FakeImage:
        self._check(client)
        if image_id not in self.images:
            raise modal.exception.NotFoundError(f"Image {image_id} not found")
        return self.images[image_id]

    # --- Sandbox ----------------------------------------------------------------------
    async def _create(
        self,
        *args: str,
        app: Any = None,
        tags: dict[str, str] | None = None,
        image: FakeImage | None = None,
        env: dict[str, str | None] | None = None,
        timeout: int | None = 300,
        workdir: str | None = None,
        cpu: float | None = None,
        memory: int | None = None,
        block_network: bool = False,
        client: Any = None,
    ) -> FakeSandbox:
        self._check(client)
        if not isinstance(app, FakeApp):
            raise modal.exception.InvalidError("Sandbox.create needs an app from App.lookup")
        used = {"tags": tags, "timeout": timeout, "cpu": cpu, "memory": memory}
        self.calls.append((app.name, {**used, "block_network": block_network}))
        image = image or FakeImage(self, DEFAULT_IMAGE)
        await image.build.aio(app)
        spec = SandboxSpec(
            image=image.engine_image or DEFAULT_IMAGE,
            workdir=workdir or "/",
            env={k: v for k, v in (env or {}).items() if v is not None},
            network=NetworkMode.NONE if block_network else NetworkMode.HOST,
            lifetime_s=float(timeout or 300),
        )
        try:
            engine = await self.engine.create(spec)
        except LookupError as exc:
            failed = f"Image build failed: {exc}"
            raise modal.exception.ImageBuildError(failed, _image_id()) from exc
        sandbox = FakeSandbox(self, engine, app, tags or {}, timeout or 300)
        self.sandboxes[sandbox.object_id] = sandbox
        return sandbox

    async def _from_id(self, sandbox_id: str, client: Any = None) -> FakeSandbox:
        self._check(client)
        if sandbox_id not in self.sandboxes:
            raise modal.exception.NotFoundError(f"Sandbox {sandbox_id} not found")
        return self.sandboxes[sandbox_id]

    async def _list(
        self, *, app_id: str | None = None, tags: dict[str, str] | None = None, client: Any = None
    ) -> AsyncGenerator[FakeSandbox, None]:
        self._check(client)
        for sandbox in self.live():
            if labels_match(sandbox.tags, tags) and app_id in (None, sandbox.app_id):
                yield sandbox


class _Namespace:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


def _ns(**attrs: Any) -> Any:
    return _Namespace(**attrs)
