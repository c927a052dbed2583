"""Warm pools on the local backend: dead sandboxes are replaced, an empty pool creates
on the spot, and SIGTERM closes what the pool held."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid

from rllm.sandboxes import OWNER_LABEL, SandboxSettings, SandboxSpec, get_backend
from rllm.sandboxes.pool import WarmPool


async def test_a_dead_ready_sandbox_is_replaced(sandbox_settings: SandboxSettings) -> None:
    owner = {OWNER_LABEL: f"pool-{uuid.uuid4().hex[:8]}"}
    backend = get_backend("local", sandbox_settings)
    pool = WarmPool(backend, SandboxSpec(labels=owner), size=1, handle_sigterm=False)
    await pool.start(wait=True)
    try:
        # another process reaps the ready sandbox behind the pool's back
        reaped = await get_backend("local", sandbox_settings).reap(owner)
        assert len(reaped) == 1
        sandbox = await pool.acquire()
        assert sandbox.id != reaped[0]
        assert (await sandbox.exec("echo fresh")).stdout == "fresh\n"
        assert (pool.stats.replaced, pool.stats.cold, pool.stats.handed_out) == (1, 1, 0)
        await sandbox.close()
    finally:
        await pool.close()
        await backend.aclose()


async def test_an_empty_pool_creates_on_the_spot(sandbox_settings: SandboxSettings) -> None:
    backend = get_backend("local", sandbox_settings)
    pool = WarmPool(backend, SandboxSpec(), size=0, handle_sigterm=False)
    await pool.start()
    try:
        sandbox = await pool.acquire()
        assert await sandbox.is_alive()
        assert pool.stats.cold == 1
        await sandbox.close()
    finally:
        await pool.close()
        await backend.aclose()


async def test_sigterm_closes_the_pools_sandboxes(sandbox_settings: SandboxSettings) -> None:
    owner = f"sigterm-{uuid.uuid4().hex[:8]}"
    script = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from rllm.sandboxes import OWNER_LABEL, SandboxSettings, SandboxSpec, get_backend
        from rllm.sandboxes.pool import WarmPool

        async def main():
            settings = SandboxSettings(home=Path({str(sandbox_settings.home)!r}))
            backend = get_backend("local", settings)
            pool = WarmPool(backend, SandboxSpec(labels={{OWNER_LABEL: {owner!r}}}), size=3)
            await pool.start(wait=True)
            held = await pool.acquire()          # one handed out, never closed by its user
            await pool.wait_ready(timeout_s=60)
            print("ready", held.id, flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 120)
        assert line.startswith("ready"), line
        backend = get_backend("local", sandbox_settings)
        assert len(await backend.sandboxes({OWNER_LABEL: owner})) == 4  # 3 ready + 1 held
        os.kill(child.pid, signal.SIGTERM)
        assert await asyncio.to_thread(child.wait, 60) == 128 + signal.SIGTERM
        assert await backend.sandboxes({OWNER_LABEL: owner}) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        await get_backend("local", sandbox_settings).reap({OWNER_LABEL: owner})
