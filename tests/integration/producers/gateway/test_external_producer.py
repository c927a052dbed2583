"""The Go producer in examples/external-producer writes events our codec decodes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionClosed, SessionOpened, StepCaptured
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "external-producer"


def test_go_producer_events_decode_with_our_codec(
    kafka: KafkaSettings, make_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    go = shutil.which("go")
    assert go is not None, "the Go toolchain is needed for this test (go on PATH)"
    make_topics(partitions=2)
    binary = tmp_path / "external-producer"
    t0 = time.monotonic()
    build = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    assert build.returncode == 0, build.stderr
    print(f"go build took {time.monotonic() - t0:.1f} s")
    topic = kafka.topic(SESSION_EVENTS)
    run = subprocess.run(
        [
            str(binary),
            "-brokers",
            kafka.bootstrap_servers,
            "-topic",
            topic,
            "-schemas",
            str(ROOT / "rllm" / "schemas" / "avro"),
            "-session",
            "go/s:1",
            "-run",
            "go-run",
            "-steps",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    printed = [json.loads(line)["event_id"] for line in run.stdout.splitlines()]
    assert len(printed) == 5

    codec = AvroCodec()
    msgs = read_all(kafka, topic)
    assert {m.key() for m in msgs} == {b"go/s:1"}
    events = [codec.decode(m.value()) for m in msgs]
    assert [e.event_id for e in events] == printed
    assert all(e.session_id == "go/s:1" and e.run_id == "go-run" for e in events)
    opened, *steps, closed = [e.payload for e in events]
    assert isinstance(opened, SessionOpened) and opened.task.ground_truth == "56"
    assert isinstance(closed, SessionClosed) and closed.num_steps == 3
    assert all(isinstance(s, StepCaptured) for s in steps)
    full: list[int] = []
    for i, step in enumerate(steps):
        assert isinstance(step, StepCaptured)
        assert step.step_index == i
        assert step.response_ids.tolist() == [100 + i, 200 + i, 2]
        np.testing.assert_allclose(step.logprobs, [-0.25, -0.5, -0.01], rtol=1e-6)
        assert step.prompt_prefix_len == len(full)
        full = full[: step.prompt_prefix_len] + step.prompt_ids.tolist()
        assert step.usage.prompt_tokens == len(full)
        full += step.response_ids.tolist()
        if i:
            assert step.parent_step_id == steps[i - 1].step_id
