"""A real gateway (uvicorn thread) in front of the fake upstream, on this test's topics."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.fakes.upstream import ThreadedServer

__all__ = ["gateway"]


@pytest.fixture
def gateway(start_gateway: Callable[..., ThreadedServer]) -> Iterator[ThreadedServer]:
    """One gateway on this test's topics (3 partitions), stopped by ``start_gateway``."""
    yield start_gateway()
