"""History performance: store-level batch ingest and query times, plus the full sink.

Prints one line per figure and a JSON line last:
- ingest_steps_per_s: 2,500-token steps (2,000 prompt + 500 response IDs and logprobs)
  with their token arrays, Arrow batch -> chDB insert (target >= 20k/s).
- ingest_light_steps_per_s: steps without token arrays (target >= 100k/s).
- *_per_cpu_s: the same per CPU second of the process, for shared or small machines.
- rewards_query_s_1m / latency_query_s_1m: the named queries over 1M light steps (best of 3,
  target <= 1 s).
- sink_events_per_s (with --sink): Kafka -> decode -> insert -> commit, light session events,
  on a broker from RLLM_BOOTSTRAP_SERVERS or a LocalBroker started for the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rllm.consumers.history.batch import RowBuffer
from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.queries import QUERIES, run_named
from rllm.consumers.history.rows import event_rows
from tests.unit.consumers.history.synthetic import synthetic_events


def _steps_batches(n: int, tokens: int, batch: int, seed: int) -> list[Any]:
    """Arrow batches of the steps table only (what the ingest figure is about)."""
    out, buf, k = [], RowBuffer(), 0
    for i, (name, datum) in enumerate(synthetic_events(n, tokens_per_step=tokens, seed=seed)):
        for table, row in event_rows(name, datum, ("perf", 0, i)):
            if table == "steps":
                buf.add(table, row)
                k += 1
        if k >= batch:
            out.extend(b for _, b in buf.batches())
            buf.clear()
            k = 0
    out.extend(b for _, b in buf.batches())
    return out


def _ingest(store: ChdbStore, batches: list[Any]) -> tuple[float, float]:
    """Steps per wall second and per CPU second of this process (chDB threads included)."""
    store.insert("steps", batches[0].slice(0, 100))  # warm the engine up
    rows = sum(b.num_rows for b in batches)
    t0, c0 = time.perf_counter(), time.process_time()
    for b in batches:
        store.insert("steps", b)
    return rows / (time.perf_counter() - t0), rows / (time.process_time() - c0)


def _load_all(store: ChdbStore, n: int) -> None:
    buf = RowBuffer()
    for i, (name, datum) in enumerate(synthetic_events(n, seed=3)):
        buf.extend(event_rows(name, datum, ("perf", 0, i)))
        if buf.rows >= 200_000:
            for table, b in buf.batches():
                store.insert(table, b)
            buf.clear()
    for table, b in buf.batches():
        store.insert(table, b)


def _best(fn: Any, tries: int = 3) -> float:
    times = []
    for _ in range(tries):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _sink_rate(n_steps: int, tokens: int = 0) -> float:
    from rllm.consumers.history.settings import HistorySettings
    from rllm.consumers.history.sink import HistorySink
    from rllm.kafka import EventPublisher, ensure_topics
    from rllm.schemas.topics import SESSION_EVENTS
    from rllm.settings import KafkaSettings

    broker = None
    servers = os.environ.get("RLLM_BOOTSTRAP_SERVERS")
    if not servers:
        import socket

        from rllm.infra.broker import LocalBroker

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        broker = LocalBroker(port, Path(tempfile.mkdtemp(prefix="rllm-perf-kafka-")))
        broker.start()
        servers = broker.bootstrap_servers
    try:
        kafka = KafkaSettings(bootstrap_servers=servers, topic_prefix=f"perf{time.time_ns()}.")
        ensure_topics(kafka)
        with EventPublisher(kafka) as pub:
            codec = pub.codec
            for name, datum in synthetic_events(n_steps, tokens_per_step=tokens, seed=5):
                if name == "rllm.events.SessionEvent":
                    pub.publish_bytes(
                        SESSION_EVENTS, datum["session_id"], codec.encode_dict(name, datum)
                    )
        events = int(n_steps * 8 / 5)  # open, 5 steps, reward, close per session
        store = ChdbStore(Path(tempfile.mkdtemp(prefix="rllm-perf-sink-")), "perf")
        sink = HistorySink(kafka, HistorySettings(history_group_id="perf"), store)
        c0 = time.process_time()
        stats = sink.run(idle_exit_s=2.0)
        print(
            f"sink: {stats.events / (time.process_time() - c0):,.0f} events per CPU second "
            f"(including the group join and 2 s idle polling), {stats.batches} batches"
        )
        store.close()
        shutil.rmtree(store.path, ignore_errors=True)
        assert stats.events >= events * 0.99, stats
        return stats.events_per_s
    finally:
        if broker is not None:
            broker.stop(purge=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--heavy", type=int, default=20_000, help="2,500-token steps to ingest")
    parser.add_argument("--light", type=int, default=200_000, help="light steps to ingest")
    parser.add_argument("--query-steps", type=int, default=1_000_000)
    parser.add_argument(
        "--sink", type=int, default=0, help="light steps through the sink (0: skip)"
    )
    parser.add_argument(
        "--sink-heavy", type=int, default=0, help="2,500-token steps through the sink (0: skip)"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rllm-perf-history-"))
    out: dict[str, Any] = {}
    store = ChdbStore(root, "perf")
    try:
        store.create_schema()
        heavy = _steps_batches(args.heavy, 2_500, 5_000, seed=1)
        wall, cpu = _ingest(store, heavy)
        out["ingest_steps_per_s"], out["ingest_steps_per_cpu_s"] = round(wall, 1), round(cpu, 1)
        print(f"ingest 2,500-token steps: {wall:,.0f} steps/s ({cpu:,.0f} per CPU second)")
        del heavy
        store.command("DROP TABLE perf.steps SYNC")
        store.create_schema()
        light = _steps_batches(args.light, 0, 50_000, seed=2)
        wall, cpu = _ingest(store, light)
        out["ingest_light_steps_per_s"] = round(wall, 1)
        out["ingest_light_steps_per_cpu_s"] = round(cpu, 1)
        print(f"ingest light steps: {wall:,.0f} steps/s ({cpu:,.0f} per CPU second)")
        del light
        qstore = store.view("perf1m")
        qstore.create_schema()
        t0 = time.perf_counter()
        _load_all(qstore, args.query_steps)
        print(
            f"loaded {args.query_steps:,} steps with sessions/rewards in "
            f"{time.perf_counter() - t0:.1f}s"
        )
        for name, query in QUERIES.items():
            for by in query.sql:
                t0 = time.perf_counter()
                rows = len(run_named(qstore, name, by).rows)
                print(f"  {name} --by {by}: {rows} rows in {time.perf_counter() - t0:.3f}s")
        out["rewards_query_s_1m"] = round(_best(lambda: run_named(qstore, "rewards")), 3)
        out["latency_query_s_1m"] = round(_best(lambda: run_named(qstore, "latency")), 3)
        print(
            f"rewards query: {out['rewards_query_s_1m']}s, latency query: "
            f"{out['latency_query_s_1m']}s over {args.query_steps:,} steps"
        )
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    if args.sink:
        out["sink_events_per_s"] = round(_sink_rate(args.sink), 1)
        print(
            f"full sink (Kafka -> decode -> insert -> commit): {out['sink_events_per_s']:,.0f} "
            "events/s (light session events)"
        )
    if args.sink_heavy:
        rate = _sink_rate(args.sink_heavy, tokens=2_500)
        out["sink_heavy_steps_per_s"] = round(rate * 5 / 8, 1)  # 5 of 8 session events are steps
        print(f"full sink, 2,500-token steps: {out['sink_heavy_steps_per_s']:,.0f} steps/s")
    out["cpus"] = os.cpu_count()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
