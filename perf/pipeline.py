"""Throughput and latency of assemble -> score(exact_match) -> group on a real broker.

Phase 1 (throughput): once the workers are up and idle, a backlog of 8-step sessions
with 2,500-token steps (prompts delta-encoded, as the gateway writes them;
``--concurrent`` sessions in flight at once, so their events interleave) is published
and ``--workers`` ``rllm-cli process`` workers drain it; steps/s = steps / (last
episode - first processed event), from the broker's log-append times. Worker CPU
ms/step = the workers' CPU time (all threads) from idle to the last episode / steps:
robust to other load on a shared machine, unlike steps/s. Phase 2 (latency): sessions
are published at a paced rate while the worker runs; delay = EpisodeAssembled
log-append time - the SessionClosed ``emitted_at`` of the group's last session. Phase 3
(size): a group of ``--long-group`` CLI-agent sessions of ``--long-steps`` steps growing
to ``--long-context`` tokens (a ``--long-system``-token system prompt, each request the
whole history with the tools after it), and a small group (``--steps`` steps of
``--tokens`` tokens), go through the same worker; bytes per episode on rllm.trajectories
(the group's trajectories) and on rllm.episodes, per token of the sessions (each token
counted once), and what the trajectories would be with full prompts and requests.
Prints figures; the last line is JSON.

    python perf/pipeline.py [--bootstrap host:port] [--sessions 1600] [--rate 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rllm.kafka import EventPublisher, ensure_topics
from rllm.schemas import types as t
from rllm.schemas.codec import AvroCodec
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.schemas.topics import EPISODES, SESSION_EVENTS, TOPICS, TRAJECTORIES
from rllm.settings import KafkaSettings

__all__ = ["main", "session_events"]

ROOT = Path(__file__).resolve().parents[1]
GROUP = 4


def session_events(
    sid: str, task_id: str, rollout: int, steps: int, tokens: int, rng: np.random.Generator
) -> list[t.SessionEvent]:
    """One session: open, ``steps`` steps of ``tokens`` new tokens each (4/5 a prompt
    suffix extending the whole previous prompt+response, 1/5 response), close."""
    task = t.Task(task_id=task_id, ground_truth_json='"42"', reward_fn="exact_match")
    resp_n = tokens // 5
    suffix_n = tokens - resp_n
    payloads: list[t.SessionPayload] = [
        t.SessionOpened(task=task, rollout_index=rollout, group_size=GROUP)
    ]
    context = 0  # tokens in the previous step's full prompt + response
    for k in range(steps):
        payloads.append(
            t.StepCaptured(
                step_id=f"{sid}/{k}",
                step_index=k,
                parent_step_id=f"{sid}/{k - 1}" if k else None,
                api=t.ApiKind.CHAT,
                model="m",
                response_json='{"choices": [{"message": {"content": "42"}}]}',
                prompt_token_ids=pack_tokens(rng.integers(0, 50000, suffix_n)),
                prompt_prefix_len=context,
                response_token_ids=pack_tokens(rng.integers(0, 50000, resp_n)),
                response_logprobs=pack_logprobs(np.full(resp_n, -0.5, dtype=np.float32)),
            )
        )
        context += suffix_n + resp_n
    payloads.append(t.SessionClosed(status=t.SessionStatus.OK, num_steps=steps))
    return [
        t.SessionEvent(
            event_id=f"{sid}/e{i}", session_id=sid, run_id="perf", producer="perf", payload=p
        )
        for i, p in enumerate(payloads)
    ]


def _size_phase(
    kafka: KafkaSettings, args: argparse.Namespace, episodes: int
) -> tuple[list[str], dict[str, Any]]:
    """Phase 3: publish a long and a small group, wait for their episodes, measure;
    returns the rows to print and the figures."""
    from rllm.schemas.delta import full_prompts, full_requests
    from tests.integration.helpers import read_all
    from tests.unit.processors.long_session import CliSession

    n = args.long_group
    shapes = {
        "long": (args.long_steps, args.long_context, args.long_system),
        "small": (args.steps, args.steps * args.tokens, args.tokens),
    }
    groups = {
        name: [
            CliSession(
                f"{name}{r}",
                t.Task(task_id=f"size-{name}", ground_truth_json='"42"', reward_fn="exact_match"),
                rollout_index=r,
                group_size=n,
                steps=steps,
                context=context,
                system_tokens=system,
                answer="42" if r % 2 else "no",
                seed=r,
                run_id="perf-size",
            )
            for r in range(n)
        ]
        for name, (steps, context, system) in shapes.items()
    }
    with EventPublisher(kafka) as pub:
        for sessions in groups.values():
            for session in sessions:
                for ev in session.events():
                    pub.publish(SESSION_EVENTS, ev.session_id, ev)
                pub.flush(60)
    deadline = time.monotonic() + 600
    while _count(kafka, EPISODES) < episodes + len(groups) and time.monotonic() < deadline:
        time.sleep(0.5)
    codec = AvroCodec()
    out: dict[str, Any] = {}
    rows = []
    for name, sessions in groups.items():
        key = f"perf-size/size-{name}".encode()
        trajs = [
            m.value() for m in read_all(kafka, kafka.topic(TRAJECTORIES), 60) if m.key() == key
        ]
        (episode,) = [
            m.value() for m in read_all(kafka, kafka.topic(EPISODES), 60) if m.key() == key
        ]
        tokens = sum(s.num_tokens for s in sessions)
        full = 0  # the trajectories' prompts and requests restored: the form this replaced
        for value in trajs:
            steps = codec.decode(value).steps
            full += sum(len(p or b"") for p in full_prompts(steps))
            full += sum(len(r or "") for r in full_requests(steps))
        traj_bytes = sum(len(v) for v in trajs)
        steps, context, _ = shapes[name]
        rows.append(
            f"phase 3 ({name}): {n} sessions x {steps} steps up to {context} tokens, "
            f"{tokens} tokens: rllm.trajectories {traj_bytes / 2**20:.2f} MiB per episode "
            f"({traj_bytes / tokens:.2f} bytes/token, largest {max(map(len, trajs)) / 2**20:.2f}"
            f" MiB), rllm.episodes {len(episode) / 2**20:.2f} MiB "
            f"({len(episode) / tokens:.2f} bytes/token) of a {kafka.max_message_bytes / 2**20:.0f}"
            f" MiB limit; with full prompts and requests the trajectories would hold "
            f"{full / 2**20:.0f} MiB"
        )
        out |= {
            f"{name}_group_tokens": tokens,
            f"{name}_trajectories_bytes_per_episode": traj_bytes,
            f"{name}_trajectories_bytes_per_token": round(traj_bytes / tokens, 3),
            f"{name}_episode_bytes": len(episode),
            f"{name}_episode_bytes_per_token": round(len(episode) / tokens, 3),
            f"{name}_full_prompt_bytes_per_episode": full,
        }
    return rows, out


def _broker(args: argparse.Namespace) -> tuple[str, Any]:
    if args.bootstrap:
        return args.bootstrap, None
    from rllm.infra.broker import LocalBroker
    from tests.ports import free_broker_port

    broker = LocalBroker(free_broker_port(), Path(tempfile.mkdtemp(prefix="rllm-perf-")), heap="1g")
    broker.start()
    return broker.bootstrap_servers, broker


def _timestamps(kafka: KafkaSettings, topic: str) -> list[tuple[int, bytes]]:
    from tests.integration.helpers import read_all

    return [(m.timestamp()[1], m.value()) for m in read_all(kafka, kafka.topic(topic), 60)]


def _count(kafka: KafkaSettings, topic: str) -> int:
    """Records in a topic by its end offsets: cheap, so waiting does not steal the CPU the
    worker is being measured on (reading every episode each second did)."""
    from rllm.kafka import end_offsets

    return sum(end_offsets(kafka, kafka.topic(topic)).values())


def _interleave(
    sessions: list[list[t.SessionEvent]], concurrent: int
) -> list[list[t.SessionEvent]]:
    """The backlog in the order many concurrent agents write it: ``concurrent`` sessions
    at a time advance one event each in turn (a session's events are then spread over
    several processing batches, as in a live run, instead of arriving back to back)."""
    out: list[list[t.SessionEvent]] = []
    for w in range(0, len(sessions), concurrent):
        wave = sessions[w : w + concurrent]
        for i in range(max(len(s) for s in wave)):
            out.extend([s[i]] for s in wave if i < len(s))
    return out


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system, all threads) the processes used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def _broker_pid(broker: Any) -> int | None:
    """The pid of the broker this script started (from its data dir's pid file)."""
    if broker is None:
        return None
    try:
        return int((Path(broker.data_dir) / "kafka.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _wait_idle(pids: list[int], timeout_s: float = 60.0) -> None:
    """Wait until the workers started up and sit idle (CPU flat for a second)."""
    deadline = time.monotonic() + timeout_s
    time.sleep(3.0)
    last, quiet = _cpu_s(pids), 0
    while time.monotonic() < deadline and quiet < 2:
        time.sleep(0.5)
        now = _cpu_s(pids)
        quiet = quiet + 1 if now - last < 0.03 * len(pids) else 0
        last = now


def _publish(
    kafka: KafkaSettings, sessions: list[list[t.SessionEvent]], rate: float | None
) -> dict[str, float]:
    """Publish; returns the wall time (ms) each session's close was emitted."""
    closed: dict[str, float] = {}
    with EventPublisher(kafka) as pub:
        start = time.monotonic()
        for i, events in enumerate(sessions):
            if rate:
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
            for ev in events[:-1]:
                pub.publish(SESSION_EVENTS, ev.session_id, ev)
            close = events[-1].model_copy(update={"emitted_at": datetime.now(UTC)})
            pub.publish(SESSION_EVENTS, close.session_id, close)
            closed[close.session_id] = close.emitted_at.timestamp() * 1000
    return closed


_BUCKETS = (
    ("avro encode", ("schemaless_writer", "encode_dict", "to_avro")),
    ("avro decode", ("schemaless_reader", "decode_dict", "from_avro")),
    ("pydantic", ("pydantic",)),
    ("prompt restore/assembly", ("rllm/processors/assemble",)),
    ("state books (json headers)", ("rllm/processors/sessions", "rllm/processors/group")),
    ("reward fn", ("rllm/benchmarks",)),
    ("kafka client (aiokafka)", ("aiokafka/",)),
    ("faust/mode machinery", ("faust/", "mode/")),
)


def _start_profiler(pid: int) -> tuple[subprocess.Popen[bytes], Path] | None:
    """Attach py-spy (if installed) to the worker; it samples until the worker exits."""
    import shutil

    exe = shutil.which("py-spy")
    if exe is None:
        print("--profile: py-spy is not installed (pip install py-spy); skipping")
        return None
    out = Path(tempfile.mkdtemp()) / "worker.txt"
    proc = subprocess.Popen(
        [exe, "record", "-p", str(pid), "-f", "raw", "-r", "50", "-o", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, out


def _report_profile(proc: subprocess.Popen[bytes], out: Path) -> None:
    """Stop py-spy and print the share of busy main-thread samples per bucket."""
    import signal

    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    shares: dict[str, int] = {}
    leaves: dict[str, int] = {}
    busy = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if "runpy" not in stack.split(";")[0]:
            continue  # main thread only: the event loop that runs the agents
        busy += int(n)
        frames = stack.split(";")[::-1]  # leaf first: charge the innermost known component
        leafmost = next(
            (name for f in frames for name, keys in _BUCKETS if any(k in f for k in keys)),
            "other (asyncio, stdlib)",
        )
        shares[leafmost] = shares.get(leafmost, 0) + int(n)
        leaves[frames[0][:90]] = leaves.get(frames[0][:90], 0) + int(n)
    print(
        f"profile: {busy / 50:.1f} s busy on the event loop thread during phase 1 "
        f"(raw py-spy samples: {out})"
    )
    for name, n in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {name:28s} {100 * n / max(busy, 1):5.1f} %")
    print("  top functions (self time):")
    for name, n in sorted(leaves.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {100 * n / max(busy, 1):5.1f} %  {name}")


def main() -> None:
    """Run both phases and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("RLLM_TEST_BOOTSTRAP"))
    ap.add_argument("--sessions", type=int, default=1600, help="backlog sessions (phase 1)")
    ap.add_argument(
        "--concurrent",
        type=int,
        default=256,
        help="backlog sessions in flight at once (their events interleave)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (one consumer group; partitions are split)",
    )
    ap.add_argument("--partitions", type=int, default=3, help="partitions per topic")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=2500)
    ap.add_argument("--rate", type=float, default=8.0, help="sessions/s in phase 2")
    ap.add_argument("--paced", type=int, default=80, help="sessions in phase 2")
    ap.add_argument("--long-group", type=int, default=8, help="phase 3 group (0: no phase 3)")
    ap.add_argument("--long-steps", type=int, default=200)
    ap.add_argument("--long-context", type=int, default=100_000)
    ap.add_argument("--long-system", type=int, default=20_000)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="sample the worker with py-spy during phase 1 and print where time goes",
    )
    args = ap.parse_args()
    bootstrap, broker = _broker(args)
    kafka = KafkaSettings(bootstrap_servers=bootstrap, topic_prefix=f"perf{uuid.uuid4().hex[:6]}.")
    ensure_topics(kafka, TOPICS, partitions=args.partitions)
    rng = np.random.default_rng(0)

    def make(n: int, tag: str) -> list[Any]:
        return [
            session_events(
                f"{tag}{s}", f"{tag}t{s // GROUP}", s % GROUP, args.steps, args.tokens, rng
            )
            for s in range(n)
        ]

    backlog, paced = make(args.sessions, "b"), make(args.paced, "p")
    size = sum(len(AvroCodec().encode(e)) for e in backlog[0])
    print(f"session: {args.steps} steps x {args.tokens} tokens, {size / 1024:.0f} KiB encoded")
    codec0 = AvroCodec()
    encoded = [
        (s[0].session_id, codec0.encode(s[0])) for s in _interleave(backlog, args.concurrent)
    ]
    env = {**os.environ, "RLLM_TICK_INTERVAL_S": "0.5", "RLLM_COMMIT_INTERVAL_S": "0.2"}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rllm.cli",
                "process",
                "-b",
                bootstrap,
                "--topic-prefix",
                kafka.topic_prefix,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(args.workers)
    ]
    pids = [w.pid for w in workers]
    try:
        _wait_idle(pids)  # started and subscribed: CPU from here on is processing
        cpu0 = _cpu_s(pids)
        broker_pid = _broker_pid(broker)
        broker0 = _cpu_s([broker_pid]) if broker_pid else 0.0
        spy = _start_profiler(workers[0].pid) if args.profile else None
        with EventPublisher(kafka) as pub:  # encoded beforehand: publishing is not the limit
            for key, value in encoded:
                pub.publish_bytes(SESSION_EVENTS, key, value)
        want = args.sessions // GROUP
        codec = AvroCodec()
        while _count(kafka, EPISODES) < want:
            time.sleep(0.25)
        cpu_ms_per_step = 1000 * (_cpu_s(pids) - cpu0) / (args.sessions * args.steps)
        broker_ms_per_step = (
            (1000 * (_cpu_s([broker_pid]) - broker0) / (args.sessions * args.steps))
            if broker_pid
            else None
        )
        changelog = _timestamps(kafka, "rllm-processors-session-headers-changelog")
        episodes = _timestamps(kafka, EPISODES)
        t0, t1 = min(ts for ts, _ in changelog), max(ts for ts, _ in episodes)
        steps_per_s = args.sessions * args.steps / ((t1 - t0) / 1000)
        print(
            f"phase 1: {args.sessions * args.steps} steps in {(t1 - t0) / 1000:.1f} s "
            f"= {steps_per_s:.0f} steps/s; worker CPU {cpu_ms_per_step:.2f} ms/step "
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
            + (f"; broker CPU {broker_ms_per_step:.2f} ms/step" if broker_ms_per_step else "")
        )
        if spy is not None:
            _report_profile(*spy)
        closed = _publish(kafka, paced, args.rate)
        while _count(kafka, EPISODES) < want + args.paced // GROUP:
            time.sleep(0.5)
        delays = []
        for ts, value in _timestamps(kafka, EPISODES):
            ep = codec.decode(value)
            last = max(closed.get(tr.session_id, -1.0) for tr in ep.trajectories)
            if last > 0:
                delays.append(ts - last)
        rows, sizes = (
            _size_phase(kafka, args, want + args.paced // GROUP) if args.long_group else ([], {})
        )
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        if broker is not None:
            broker.stop(purge=True)
    p50, p99 = float(np.percentile(delays, 50)), float(np.percentile(delays, 99))
    print(
        f"phase 2: {args.paced} sessions at {args.rate:g}/s ({args.rate * args.steps:g} "
        f"steps/s): close->episode p50 {p50:.0f} ms, p99 {p99:.0f} ms"
    )
    for row in rows:
        print(row)
    print(
        json.dumps(
            {
                "steps_per_s": round(steps_per_s, 1),
                "close_to_episode_p50_ms": round(p50, 1),
                "close_to_episode_p99_ms": round(p99, 1),
                "paced_steps_per_s": args.rate * args.steps,
                "tokens_per_step": args.tokens,
                "steps_per_session": args.steps,
                "worker_cpu_ms_per_step": round(cpu_ms_per_step, 3),
                "broker_cpu_ms_per_step": broker_ms_per_step and round(broker_ms_per_step, 3),
                "sessions": args.sessions,
                "workers": args.workers,
                "partitions": args.partitions,
                **sizes,
            }
        )
    )


if __name__ == "__main__":
    main()
