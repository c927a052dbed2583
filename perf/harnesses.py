"""What a harness rollout costs, per harness; prints a row each, JSON last line.

Run: ``python perf/harnesses.py [--harnesses bash,codex] [--rollouts 8] [--in-flight 8]
[--bootstrap HOST:PORT]``. Each harness solves the shipped ``hello-file`` task
``--rollouts`` times, ``--in-flight`` at once, in real local sandboxes (bubblewrap, root)
behind a real gateway and a scripted model (``tests.fakes.scripted``: the same answers as
the harness contract suite), on a broker started here unless ``--bootstrap`` names one.

Per harness: install seconds (``install_cold_s``: the host install as its marker recorded
it, or measured now when it was missing; ``install_cached_s``: the check that finds it
installed, what every later run pays, as a snapshot would), seconds from a rollout's start
to its first model call (p50), gateway calls per rollout, rollouts per minute, and the
sandbox's share of a rollout (creating, preparing and closing it, over the rollout's wall
time). Target: the harness's own startup dominates (``sandbox_share`` <= 0.10).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rllm.benchmarks.harbor import load_task, to_task  # noqa: E402
from rllm.producers.harnesses import HarnessRollout, get_harness  # noqa: E402
from rllm.producers.harnesses.host import INSTALLED_MARKER, harnesses_home  # noqa: E402
from rllm.producers.harnesses.registry import harness_names  # noqa: E402
from rllm.producers.sdk import GatewayClient  # noqa: E402
from rllm.sandboxes import OWNER_LABEL, SandboxSettings, get_backend  # noqa: E402
from rllm.schemas.types import SessionStatus  # noqa: E402

__all__ = ["main"]

TASKS = ROOT / "tests" / "fixtures" / "harbor_tasks"


def _install_cold_s(name: str, home: Path) -> tuple[float, float, bool]:
    """(cold install seconds, cached check seconds, measured now)."""
    harness = get_harness(name)
    measured = not harness.is_installed(home)
    began = time.perf_counter()
    asyncio.run(harness.install(home))
    cold = time.perf_counter() - began
    began = time.perf_counter()
    asyncio.run(harness.install(home))  # installed: the lock, the marker, nothing else
    cached = time.perf_counter() - began
    install_dir = getattr(harness, "install_dir", None)
    if not measured and install_dir is not None:
        marker = install_dir(home) / INSTALLED_MARKER
        if marker.is_file():  # "<name> <version> <seconds>s", written by the install
            cold = float(marker.read_text().split()[-1].rstrip("s"))
    return cold, cached, measured


def _task_dir(name: str, tmp: Path) -> Path:
    from tests.integration.harnesses.scripts import hello_file

    return hello_file(name, tmp)


async def _measure(
    name: str, rollouts: int, in_flight: int, gateway_url: str, proxy: Any, tmp: Path
) -> dict[str, Any]:
    backend = get_backend("local", SandboxSettings())
    owner = f"perf-{uuid.uuid4().hex[:8]}"
    rollout = HarnessRollout(get_harness(name), backend, labels={OWNER_LABEL: owner})
    task = to_task(load_task(_task_dir(name, tmp)), "harbor-fixtures")
    client = GatewayClient(proxy.url)
    gate = asyncio.Semaphore(in_flight)
    starts: dict[str, float] = {}
    results: list[Any] = []

    async def one(index: int) -> None:
        async with gate:
            began = time.perf_counter()
            outcome = await rollout.run(task, client, run_id=f"perf-{name}-{owner}",
                                        model="scripted", rollout_index=max(index, 0))  # fmt: skip
            starts[outcome.session_id] = began
            results.append((outcome, time.perf_counter() - began))

    # one run first, outside the clock: the task's image and the harness's snapshot are built
    await one(-1)
    results.clear()
    starts.clear()
    proxy.requests.clear()
    began = time.perf_counter()
    try:
        await asyncio.gather(*(one(i) for i in range(rollouts)))
    finally:
        await client.aclose()
        await backend.reap({OWNER_LABEL: owner})
        await backend.aclose()
    wall = time.perf_counter() - began
    ok = [o for o, _ in results if o.status is SessionStatus.OK and o.output.get("reward") == 1.0]
    calls = [r for r in proxy.requests if "/v1/" in r.path]
    first = []
    for sid, start in starts.items():
        mine = [r.arrived for r in calls if sid in r.path]
        if mine:
            first.append(min(mine) - start)
    sandbox_s = sum(float(o.output.get("sandbox_s", 0.0)) for o, _ in results)
    total_s = sum(seconds for _, seconds in results)
    return {
        "solved": len(ok),
        "rollouts": len(results),
        "first_call_p50_s": round(statistics.median(first), 3) if first else None,
        "calls_per_rollout": round(len(calls) / max(1, len(results)), 2),
        "rollout_p50_s": round(statistics.median(s for _, s in results), 3),
        "rollouts_per_min": round(len(results) / wall * 60, 1),
        "sandbox_share": round(sandbox_s / total_s, 3) if total_s else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harnesses", default=",".join(harness_names()))
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--bootstrap", default=None, help="a running broker [start one here]")
    args = parser.parse_args()
    names = [n.strip() for n in args.harnesses.split(",") if n.strip()]

    from rllm.infra import LocalBroker
    from rllm.kafka import ensure_topics
    from rllm.producers.gateway import GatewaySettings, create_app
    from rllm.settings import KafkaSettings
    from tests.fakes.recorder import RecordingProxy
    from tests.fakes.scripted import start_scripted_upstream
    from tests.fakes.server import ThreadedServer
    from tests.integration.harnesses.test_contract import SOLVE
    from tests.ports import free_broker_port

    home = harnesses_home()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rllm-perf-harnesses-") as tmp_s:
        tmp = Path(tmp_s)
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = LocalBroker(free_broker_port(), tmp / "kafka")
            broker.start()
            bootstrap = broker.bootstrap_servers
        kafka = KafkaSettings(
            bootstrap_servers=bootstrap, topic_prefix=f"perf-{uuid.uuid4().hex[:6]}."
        )
        ensure_topics(kafka, partitions=3)
        upstream = start_scripted_upstream(["done"])
        gateway = ThreadedServer(
            create_app(
                GatewaySettings(upstream_url=upstream.url, spool_dir=tmp / "spool",
                                spool_fsync=False, follow_policy_updates=False, insecure=True),
                kafka,
            ),
            lifespan="on",
        )  # fmt: skip
        proxy = RecordingProxy(gateway.url)
        try:
            for name in names:
                upstream.script[:] = list(SOLVE[name]) or ["done"]
                cold, cached, measured = _install_cold_s(name, home)
                figures = asyncio.run(
                    _measure(name, args.rollouts, args.in_flight, gateway.url, proxy, tmp)
                )
                row = {"harness": name, "version": get_harness(name).version,
                       "install_cold_s": round(cold, 1), "install_measured_now": measured,
                       "install_cached_s": round(cached, 4), **figures}  # fmt: skip
                rows.append(row)
                print(
                    f"{name:<15} install {row['install_cold_s']:>6.1f} s cold, "
                    f"{row['install_cached_s'] * 1000:.1f} ms cached; first call "
                    f"{row['first_call_p50_s']} s; {row['calls_per_rollout']} calls/rollout; "
                    f"{row['rollouts_per_min']} rollouts/min ({args.in_flight} in flight); "
                    f"sandbox share {row['sandbox_share']}; solved {row['solved']}/"
                    f"{row['rollouts']}",
                    flush=True,
                )
        finally:
            proxy.stop()
            gateway.stop()
            upstream.stop()
            if broker is not None:
                broker.stop(purge=True)
    print(json.dumps({"harnesses": rows, "in_flight": args.in_flight}))


if __name__ == "__main__":
    main()
