"""Helpers of the processor integration tests: publish sessions, run workers, read outputs
(the ``workers`` fixture is in this folder's conftest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rllm.kafka import EventPublisher, end_offsets, group_lag
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionEvent
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.paths import ROOT
from tests.unit.processors.factory import make_session, task

CODEC = AvroCodec()


def grouped_sessions(sessions: int, group: int) -> list[SessionEvent]:
    """Events of ``sessions`` two-step sessions, ``group`` per task; every third answer
    is wrong (so groups carry different rewards)."""
    events: list[SessionEvent] = []
    for s in range(sessions):
        events += make_session(
            f"s{s}",
            the_task=task(f"t{s // group}"),
            rollout_index=s % group,
            group_size=group,
            num_steps=2,
            answer="56" if s % 3 else "no",
        )
    return events


def publish(kafka: KafkaSettings, events: list[SessionEvent]) -> None:
    """Publish session events keyed by session_id and wait for the acks."""
    with EventPublisher(kafka) as pub:
        for ev in events:
            pub.publish(SESSION_EVENTS, ev.session_id, ev)


def publish_raw(kafka: KafkaSettings, key: bytes, value: bytes) -> None:
    """Publish arbitrary bytes to the session log (poison)."""
    with EventPublisher(kafka) as pub:
        pub.publish_bytes(SESSION_EVENTS, key, value).result(timeout=10)


def records(kafka: KafkaSettings, name: str) -> list[Any]:
    """Decoded records of a topic (name without the test prefix)."""
    return [CODEC.decode(m.value()) for m in read_all(kafka, kafka.topic(name))]


def count(kafka: KafkaSettings, name: str) -> int:
    """Records in a topic by its end offsets (cheap; counts aborted/uncommitted too)."""
    return sum(end_offsets(kafka, kafka.topic(name)).values())


def processors_group(kafka: KafkaSettings) -> str:
    """The workers' consumer group (their faust app id, topic-prefixed)."""
    return kafka.topic("rllm-processors")


def read_every_session_event(kafka: KafkaSettings) -> bool:
    """Whether the workers have committed every record on the session log so far."""
    return not group_lag(kafka, processors_group(kafka), kafka.topic(SESSION_EVENTS))


def wait_until(pred: Callable[[], bool], timeout_s: float, what: str | Callable[[], str]) -> None:
    """Poll ``pred`` every 0.5 s; fail naming ``what`` (a callable: computed at the time of
    failure) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    said = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {said}")


class Workers:
    """Starts ``rllm-cli process`` subprocesses; stops whatever is left at teardown."""

    def __init__(self, kafka: KafkaSettings, log_dir: Path) -> None:
        self.kafka, self.log_dir = kafka, log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, **env: Any) -> subprocess.Popen[bytes]:
        """Start a worker with extra CLI args and RLLM_* env settings."""
        environ = {
            **os.environ,
            "RLLM_SESSION_TIMEOUT_S": "6",
            "RLLM_TICK_INTERVAL_S": "0.5",
            "RLLM_COMMIT_INTERVAL_S": "0.5",
            **{f"RLLM_{k.upper()}": str(v) for k, v in env.items()},
        }
        log = open(self.log_dir / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rllm.cli",
                "process",
                "-b",
                self.kafka.bootstrap_servers,
                "--topic-prefix",
                self.kafka.topic_prefix,
                *args,
            ],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, index: int) -> str:
        """A worker's output so far."""
        return (self.log_dir / f"worker-{index}.log").read_text(errors="replace")

    def stop(self, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> int:
        """SIGTERM and wait."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=timeout_s)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
