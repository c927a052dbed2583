"""Fakes of the hosted sandbox services, wired to the real SDKs (daytona: an HTTP fake of
its REST API and toolbox on a loopback port; modal: a fake at the SDK's Python boundary),
each fake sandbox a real engine sandbox underneath.

``daytona_backend(settings)`` and ``modal_backend(settings)`` start a fake and yield a real
backend pointed at it (what a contract suite needs); ``daytona_fake`` and ``modal_fake``
yield the pair (backend, fake), for tests that look into the fake. At exit the backend and
the fake are closed::

    async with daytona_backend(sandbox_settings) as backend:
        sandbox = await backend.create(SandboxSpec())
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pydantic import SecretStr

from rllm.sandboxes.daytona.backend import DaytonaBackend
from rllm.sandboxes.modal.backend import ModalBackend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import SandboxBackend
from tests.fakes.server import ThreadedServer
from tests.fakes_sandboxes.daytona import FAKE_API_KEY, FakeDaytona
from tests.fakes_sandboxes.engine import engine_backend
from tests.fakes_sandboxes.modal import FakeModal

__all__ = [
    "RunningFake",
    "daytona_backend",
    "daytona_fake",
    "modal_backend",
    "modal_fake",
    "settings_for",
    "start_fake",
    "stop_fake",
]


@asynccontextmanager
async def daytona_backend(settings: SandboxSettings) -> AsyncIterator[DaytonaBackend]:
    """A ``DaytonaBackend`` talking to a fresh ``FakeDaytona`` on a loopback port."""
    async with daytona_fake(settings) as (backend, _fake):
        yield backend


@asynccontextmanager
async def modal_backend(settings: SandboxSettings) -> AsyncIterator[ModalBackend]:
    """A ``ModalBackend`` whose ``modal`` module is a fresh ``FakeModal``."""
    async with modal_fake(settings) as (backend, _fake):
        yield backend


@asynccontextmanager
async def daytona_fake(
    settings: SandboxSettings,
) -> AsyncIterator[tuple[DaytonaBackend, FakeDaytona]]:
    """A ``DaytonaBackend`` and the ``FakeDaytona`` it talks to."""
    running = start_fake(engine_backend(settings, "daytona"))
    backend = DaytonaBackend(settings_for(settings, running))
    try:
        yield backend, running.fake
    finally:
        try:
            await backend.aclose()
        finally:
            await asyncio.to_thread(stop_fake, running)


@asynccontextmanager
async def modal_fake(
    settings: SandboxSettings,
) -> AsyncIterator[tuple[ModalBackend, FakeModal]]:
    """A ``ModalBackend`` and the ``FakeModal`` it uses as its ``modal`` module."""
    fake = FakeModal(engine_backend(settings, "modal"))
    backend = ModalBackend(FakeModal.settings_for(settings), sdk=fake)
    try:
        yield backend, fake
    finally:
        try:
            await backend.aclose()
        finally:
            await fake.shutdown()


@dataclass
class RunningFake:
    """A started fake: its state and the API URL to give the SDK."""

    fake: FakeDaytona
    server: ThreadedServer

    @property
    def api_url(self) -> str:
        """What ``DaytonaConfig.api_url`` / ``RLLM_SANDBOX_DAYTONA_API_URL`` should be."""
        return f"{self.server.url}/api"


def start_fake(engine: SandboxBackend) -> RunningFake:
    """Serve a ``FakeDaytona`` on a loopback port (``stop_fake`` ends it)."""
    fake = FakeDaytona(engine=engine)
    server = ThreadedServer(fake.app, lifespan="on")
    fake.url = server.url
    return RunningFake(fake=fake, server=server)


def stop_fake(running: RunningFake, timeout_s: float = 30.0) -> None:
    """Stop the server; its shutdown closes the engine sandboxes still open."""
    deadline = time.monotonic() + timeout_s
    running.server.stop()
    while running.fake.sandboxes and time.monotonic() < deadline:
        time.sleep(0.05)


def settings_for(settings: SandboxSettings, running: RunningFake) -> SandboxSettings:
    """``settings`` pointed at the fake, with its key."""
    return settings.model_copy(
        update={"daytona_api_key": SecretStr(FAKE_API_KEY), "daytona_api_url": running.api_url}
    )
