"""Fixtures of the sandbox tests (a pytest plugin that ``tests/conftest.py`` loads): real
backends (bubblewrap, a dockerd that CI starts) and HTTP/SDK fakes for the hosted ones
(daytona, modal).

The base image is built once per machine by debootstrap into ``RLLM_TEST_SANDBOX_HOME``
(default ``/var/tmp/rllm-test-sandboxes``) and shared by every test; each test gets its
own run directory and snapshot registry on top of it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from rllm.sandboxes.images.base import ensure_base
from rllm.sandboxes.images.store import ImageStore, LocalImage
from rllm.sandboxes.settings import SandboxSettings

BASE_IMAGE = "debian:bookworm"


def shared_home() -> Path:
    """Where the tests' image store lives (kept across runs: the base image takes 10-30 s)."""
    return Path(os.environ.get("RLLM_TEST_SANDBOX_HOME", "/var/tmp/rllm-test-sandboxes"))


@pytest.fixture(scope="session")
def base_image() -> LocalImage:
    """``debian:bookworm`` in the shared image store."""
    return ensure_base(ImageStore(shared_home() / "images"), BASE_IMAGE)


@pytest.fixture
def sandbox_settings(base_image: LocalImage) -> Iterator[SandboxSettings]:
    """Settings of one test: its own home (run dir, snapshot registry) whose ``images/``
    links to the shared image store; the home goes at the end, sandboxes first."""
    home = shared_home() / "tests" / uuid.uuid4().hex[:10]
    home.mkdir(parents=True)
    (home / "images").symlink_to(shared_home() / "images")
    settings = SandboxSettings(home=home)
    yield settings
    from rllm.sandboxes.local.backend import LocalBackend

    asyncio.run(LocalBackend(settings).reap())  # what a failed test left running
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
async def daytona(sandbox_settings: SandboxSettings) -> AsyncIterator[tuple[Any, Any]]:
    """A ``DaytonaBackend`` and the ``FakeDaytona`` it talks to (on a loopback port)."""
    from tests.fakes_sandboxes import daytona_fake

    async with daytona_fake(sandbox_settings) as pair:
        yield pair


@pytest.fixture
async def modal(sandbox_settings: SandboxSettings) -> AsyncIterator[tuple[Any, Any]]:
    """A ``ModalBackend`` and the ``FakeModal`` it uses as its ``modal`` module."""
    from tests.fakes_sandboxes import modal_fake

    async with modal_fake(sandbox_settings) as pair:
        yield pair


@pytest.fixture
async def local_sandbox_backend(sandbox_settings: SandboxSettings) -> AsyncIterator[Any]:
    """The local backend on the test's own home (the shared image store)."""
    from rllm.sandboxes import get_backend

    made = get_backend("local", sandbox_settings)
    yield made
    await made.aclose()
