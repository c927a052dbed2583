"""Sandbox costs per backend; prints figures, JSON last line.

Run: ``python perf/sandboxes.py [--backends local,docker] [--n 30] [--max-alive 64]``.
Per backend: create from the base image (cold: no pool, nothing reused), create from a
snapshot, acquire from a warm pool, ``exec`` of ``true``, each as p50 / p99 in ms, and
the most sandboxes alive at once (created until ``--max-alive`` or the first failure,
each checked with an ``exec``). Hosted backends (daytona, modal) need accounts: measure
them where you have one. Targets for ``local``: create from snapshot p50 <= 50 ms, warm
acquire p50 <= 5 ms, exec p50 <= 10 ms, 64 alive at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from rllm.sandboxes import OWNER_LABEL, SandboxBackend, SandboxSettings, SandboxSpec, get_backend
from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.pool import WarmPool

__all__ = ["main"]


def _quantiles(samples_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return round(statistics.median(ordered), 2), round(p99, 2)


async def _timed(n: int, step: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def _measure(backend: SandboxBackend, n: int, max_alive: int) -> dict[str, float | int]:
    owner = {OWNER_LABEL: f"perf-{uuid.uuid4().hex[:8]}"}
    spec = SandboxSpec(image="debian:bookworm", labels=owner)
    figures: dict[str, float | int] = {}

    async def create_close(s: SandboxSpec) -> None:
        sandbox = await backend.create(s)
        await sandbox.close()

    await create_close(spec)  # the base image is built or imported once, outside the clock
    figures["create_cold_p50_ms"], figures["create_cold_p99_ms"] = _quantiles(
        await _timed(n, lambda: create_close(spec))
    )

    prepared = await backend.create(spec)
    await prepared.exec("mkdir -p /opt/perf && echo ready > /opt/perf/marker")
    snap = await prepared.snapshot(f"perf-{uuid.uuid4().hex[:8]}")
    await prepared.close()
    from_snapshot = spec.model_copy(update={"image": snap.image})
    try:
        figures["create_from_snapshot_p50_ms"], figures["create_from_snapshot_p99_ms"] = _quantiles(
            await _timed(n, lambda: create_close(from_snapshot))
        )
    finally:
        await backend.snapshots.delete(snap.name)

    pool = WarmPool(backend, spec, size=4, handle_sigterm=False)
    await pool.start(wait=True)
    acquired = []

    async def acquire() -> None:
        acquired.append(await pool.acquire())

    samples = []
    for _ in range(n):
        await pool.wait_ready(timeout_s=120)  # a steady pool: measure the handoff, not a refill
        samples += await _timed(1, acquire)
        await acquired.pop().close()
    await pool.close()
    figures["warm_acquire_p50_ms"], figures["warm_acquire_p99_ms"] = _quantiles(samples)

    sandbox = await backend.create(spec)
    await sandbox.exec("true")
    figures["exec_p50_ms"], figures["exec_p99_ms"] = _quantiles(
        await _timed(n * 3, lambda: sandbox.exec("true"))
    )
    await sandbox.close()

    alive = []
    try:
        while len(alive) < max_alive:
            box = await backend.create(spec)
            alive.append(box)
            if not (await box.exec("true")).ok:
                break
    except SandboxError as exc:
        print(f"  {backend.name}: creation {len(alive) + 1} failed: {exc}")
    figures["max_alive"] = len(alive)
    await asyncio.gather(*(b.close() for b in alive))
    await backend.reap(owner)
    return figures


async def _run(names: list[str], n: int, max_alive: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        try:
            backend = get_backend(name, SandboxSettings())
        except SandboxError as exc:
            print(f"{name}: not measured: {exc}")
            results[name] = {"error": str(exc)}
            continue
        try:
            results[name] = await _measure(backend, n, max_alive)
        except SandboxError as exc:
            print(f"{name}: failed: {exc}")
            results[name] = {"error": str(exc)}
        finally:
            await backend.aclose()
        for key, value in results[name].items():
            print(f"{name:8s} {key:30s} {value}")
    return results


def main() -> None:
    """Measure each backend named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--n", type=int, default=30, help="samples per figure")
    parser.add_argument("--max-alive", type=int, default=64)
    args = parser.parse_args()
    results = asyncio.run(_run(args.backends.split(","), args.n, args.max_alive))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
