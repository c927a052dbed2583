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

``--family shell-basics`` runs each rollout on its own generated task (``rllm-cli bench
gen``) instead of hello-file. ``--gateway-url URL --model NAME`` sends the rollouts through
a running gateway (``rllm-cli up``: SmolLM2 on the local model server) instead of the
scripted model; then ``outside_model_share`` (the part of a rollout's wall time not spent
waiting for the model's answers: sandbox, harness startup, tool runs, the verifier) is the
figure issue 35 sets at <= 0.10 for ``bash``. ``--max-turns N --max-tokens M`` give rllm's own
loops (``bash``, ``react``) the demo's budget (``make demo-agent``: 2 turns of 48 tokens, the
last ending the run); without them a loop runs to its defaults (50 turns, no token limit).
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
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rllm.benchmarks.harbor import load_task, to_task  # noqa: E402
from rllm.producers.harnesses import HarnessRollout, get_harness  # noqa: E402
from rllm.producers.harnesses.host import (  # noqa: E402
    INSTALLED_MARKER,
    harnesses_home,
    install,
    is_installed,
)
from rllm.producers.harnesses.registry import harness_names  # noqa: E402
from rllm.producers.sdk import GatewayClient  # noqa: E402
from rllm.sandboxes import OWNER_LABEL, SandboxSettings, get_backend  # noqa: E402
from rllm.schemas.types import SessionStatus  # noqa: E402

__all__ = ["main"]

TASKS = ROOT / "tests" / "fixtures" / "harbor_tasks"


def _install_cold_s(name: str, home: Path) -> tuple[float, float, bool]:
    """(cold install seconds, cached check seconds, measured now)."""
    harness = get_harness(name)
    measured = not is_installed(harness, home)
    began = time.perf_counter()
    asyncio.run(install(harness, home))
    cold = time.perf_counter() - began
    began = time.perf_counter()
    asyncio.run(install(harness, home))  # installed: the lock, the marker, nothing else
    cached = time.perf_counter() - began
    install_dir = getattr(harness, "install_dir", None)
    if not measured and install_dir is not None:
        marker = install_dir(home) / INSTALLED_MARKER
        if marker.is_file():  # "<name> <version> <seconds>s", written by the install
            cold = float(marker.read_text().split()[-1].rstrip("s"))
    return cold, cached, measured


def _task_dirs(name: str, tmp: Path, family: str | None, count: int) -> list[Path]:
    """The task folder of each rollout: hello-file for every one, or ``count`` generated
    tasks of ``family`` (one each, in order)."""
    if family is None:
        from tests.integration.producers.harnesses.scripts import hello_file

        return [hello_file(name, tmp)] * count
    from rllm.benchmarks.harbor.generate import generate_family

    split = generate_family(family, count + 1, tmp / f"{family}-{name}", test_fraction=0.5)
    folders = sorted([*split.train.iterdir(), *split.test.iterdir()])
    return [folders[i % len(folders)] for i in range(count)]


def _harness(name: str, max_turns: int | None, max_tokens: int | None) -> Any:
    """The harness ``name``; with a budget, one of rllm's loops made as the agent demo makes
    it (each call at most ``max_tokens``, the ``max_turns``-th call ending the run)."""
    harness = get_harness(name)
    if max_turns is None and max_tokens is None:
        return harness
    from rllm.producers.harnesses.loop import LoopHarness

    if not isinstance(harness, LoopHarness):
        raise SystemExit(f"--max-turns/--max-tokens take only rllm's own loops, not {name!r}")
    sampling = {} if max_tokens is None else {"max_tokens": max_tokens}
    return type(harness)(
        max_turns=max_turns or harness.max_turns, sampling=sampling, turn_limit_ends=True
    )


async def _measure(
    name: str,
    rollouts: int,
    in_flight: int,
    proxy: Any,
    tmp: Path,
    family: str | None = None,
    model: str = "scripted",
    harness: Any = None,
) -> dict[str, Any]:
    backend = get_backend("local", SandboxSettings())
    owner = f"perf-{uuid.uuid4().hex[:8]}"
    harness = harness or get_harness(name)
    rollout = HarnessRollout(harness, backend, labels={OWNER_LABEL: owner})
    folders = _task_dirs(name, tmp, family, rollouts + 1)
    tasks = [to_task(load_task(folder), "perf") for folder in folders]
    client = GatewayClient(proxy.url)
    gate = asyncio.Semaphore(in_flight)
    starts: dict[str, float] = {}
    results: list[Any] = []

    async def one(index: int) -> None:
        async with gate:
            began = time.perf_counter()
            outcome = await rollout.run(
                tasks[index + 1],
                client,
                run_id=f"perf-{name}-{owner}",
                model=model,
                rollout_index=max(index, 0),
            )
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
    first, model_s = [], 0.0
    for sid, start in starts.items():
        mine = [r for r in calls if sid in r.path]
        if mine:
            first.append(min(r.arrived for r in mine) - start)
        model_s += sum((r.finished or r.arrived) - r.arrived for r in mine)
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
        "outside_model_share": round(1 - model_s / total_s, 3) if total_s else None,
        "model_s_per_rollout": round(model_s / max(1, len(results)), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harnesses", default=",".join(harness_names()))
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--bootstrap", default=None, help="a running broker [start one here]")
    parser.add_argument("--family", default=None, help="generated tasks (shell-basics)")
    parser.add_argument("--gateway-url", default=None, help="a running gateway [scripted]")
    parser.add_argument("--model", default="local", help="with --gateway-url [local]")
    parser.add_argument("--max-turns", type=int, default=None, help="a loop's model calls")
    parser.add_argument("--max-tokens", type=int, default=None, help="a loop call's tokens")
    args = parser.parse_args()
    names = [n.strip() for n in args.harnesses.split(",") if n.strip()]

    from rllm.infra import LocalBroker
    from rllm.kafka import ensure_topics
    from rllm.producers.gateway import GatewaySettings, create_app
    from rllm.settings import KafkaSettings
    from tests.fakes.recorder import RecordingProxy
    from tests.fakes.scripted import start_scripted_upstream
    from tests.fakes.server import ThreadedServer
    from tests.integration.producers.harnesses.test_contract import SOLVE
    from tests.ports import free_broker_port

    home = harnesses_home()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rllm-perf-harnesses-") as tmp_s, ExitStack() as stack:
        tmp = Path(tmp_s)
        if args.gateway_url:
            proxy, upstream, model = RecordingProxy(args.gateway_url), None, args.model
        else:
            bootstrap = args.bootstrap
            if bootstrap is None:
                broker = LocalBroker(free_broker_port(), tmp / "kafka")
                broker.start()
                stack.callback(broker.stop, purge=True)
                bootstrap = broker.bootstrap_servers
            kafka = KafkaSettings(
                bootstrap_servers=bootstrap, topic_prefix=f"perf-{uuid.uuid4().hex[:6]}."
            )
            ensure_topics(kafka, partitions=3)
            upstream = start_scripted_upstream(["done"])
            stack.callback(upstream.stop)
            gateway = ThreadedServer(
                create_app(
                    GatewaySettings(
                        upstream_url=upstream.url,
                        spool_dir=tmp / "spool",
                        spool_fsync=False,
                        follow_policy_updates=False,
                        insecure=True,
                    ),
                    kafka,
                ),
                lifespan="on",
            )
            stack.callback(gateway.stop)
            proxy, model = RecordingProxy(gateway.url), "scripted"
        stack.callback(proxy.stop)
        for name in names:
            if upstream is not None:
                upstream.script[:] = list(SOLVE[name]) or ["done"]
            cold, cached, measured = _install_cold_s(name, home)
            harness = _harness(name, args.max_turns, args.max_tokens)
            figures = asyncio.run(
                _measure(
                    name, args.rollouts, args.in_flight, proxy, tmp, args.family, model, harness
                )
            )
            row = {
                "harness": name,
                "version": get_harness(name).version,
                "model": model,
                "tasks": args.family or "hello-file",
                "max_turns": args.max_turns,
                "max_tokens": args.max_tokens,
                "install_cold_s": round(cold, 1),
                "install_measured_now": measured,
                "install_cached_s": round(cached, 4),
                **figures,
            }
            rows.append(row)
            print(
                f"{name:<15} install {row['install_cold_s']:>6.1f} s cold, "
                f"{row['install_cached_s'] * 1000:.1f} ms cached; first call "
                f"{row['first_call_p50_s']} s; {row['calls_per_rollout']} calls/rollout; "
                f"{row['rollouts_per_min']} rollouts/min ({args.in_flight} in flight); "
                f"sandbox share {row['sandbox_share']}; outside the model "
                f"{row['outside_model_share']}; solved {row['solved']}/{row['rollouts']}",
                flush=True,
            )
    print(json.dumps({"harnesses": rows, "in_flight": args.in_flight}))


if __name__ == "__main__":
    main()
