"""HTTP clients made per batch or per poll share one TLS context (building one loads the
CA bundle: 25-170 ms of CPU with the GIL held)."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from rllm.producers.sdk.client import GatewayClient
from rllm.tls import shared_tls


def test_gateway_clients_build_one_tls_context_between_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        ctx = real(*args, **kwargs)
        built.append(ctx)
        return ctx

    monkeypatch.setattr(ssl, "create_default_context", counting)
    shared_tls.cache_clear()
    try:

        async def three() -> None:
            for _ in range(3):
                await GatewayClient("http://127.0.0.1:1").aclose()

        asyncio.run(three())
        assert len(built) == 1
        assert shared_tls() is built[0]
    finally:
        shared_tls.cache_clear()
