"""How soon a new policy reaches the steps: the time from publishing a ``PolicyUpdated`` on
``rllm.policy-updates`` to the first step the gateway stamps with that version, per server
kind, on a real Kafka broker (``--bootstrap``, else one started in a temporary directory).

Each kind is a gateway (in this process, ``follow_policy_updates``, its own topics) in front
of one server:

- ``vllm``: the in-process fake of vLLM's runtime LoRA routes (``tests.fakes_training.vllm``:
  ``POST /v1/load_lora_adapter``, then ``GET /v1/models`` lists it); the checkpoint is an
  adapter folder. The fake loads nothing: this is the gateway's part of the sync.
- ``sglang``: the in-process fake of SGLang's ``POST /update_weights_from_disk`` and
  ``GET /get_model_info`` (``tests.fakes_training.sglang``), answering ``/generate`` from the
  tiny model; it loads nothing either.
- ``local``: our model server (``rllm.serving``) on the tiny random model, which follows the
  log itself and really loads each checkpoint (a full safetensors copy of its weights: the
  local server loads full weights, not LoRA adapters); the gateway asks its ``/health``.

While a version is published, one session sends completions back to back through the
gateway; every step's stamp is read back from the session topic, and a version's latency is
the time the first call whose step carries it was answered minus the publish time (late by
at most one call: ``call_interval_ms``; a step is stamped with the version that answered it,
which the local server reports with each answer, so that call may have been sent before the
publish). ``--rounds`` versions per kind, after a first one published as
the gateway starts (its figure apart: it includes the follower joining the topic).

Routing across 2 replicas is not measured twice: ``perf/gateway.py --replicas-only`` is run
(``--replicas-seconds`` of load) and its added-latency figures are copied into the summary.

``--short``: 3 versions per kind and a short replicas load (about a minute). Prints one line
per figure and a JSON line last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perf.gateway import _broker  # noqa: E402
from rllm.kafka import EventPublisher, ensure_topics  # noqa: E402
from rllm.schemas.policy import PolicyUpdated  # noqa: E402
from rllm.schemas.topics import POLICY_UPDATES, SESSION_EVENTS  # noqa: E402
from rllm.schemas.types import StepCaptured  # noqa: E402
from rllm.settings import KafkaSettings  # noqa: E402
from tests.fakes.upstream import ThreadedServer  # noqa: E402

KINDS = ("vllm", "sglang", "local")


class Rollouts:
    """One session sending completions back to back through the gateway on a thread;
    ``answered`` holds the time each call's answer came, in the order its steps are
    captured."""

    def __init__(self, gateway: str, model: str) -> None:
        info = httpx.post(f"{gateway}/sessions", json={}, timeout=30).json()
        self.session_id: str = info["session_id"]
        self._url, self._model = f"{info['base_url']}/completions", model
        self.answered: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._stop.is_set():
                body = {"model": self._model, "prompt": "hello world", "max_tokens": 2}
                r = client.post(self._url, json=body)
                if r.status_code != 200:
                    raise RuntimeError(f"a rollout failed: {r.status_code} {r.text[:200]}")
                self.answered.append(time.monotonic())

    def __enter__(self) -> Rollouts:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _stamps(kafka: KafkaSettings, session_id: str) -> list[int]:
    """The policy version of each of the session's steps, in capture order."""
    from rllm.schemas.codec import AvroCodec
    from tests.integration.helpers import read_all

    codec = AvroCodec()
    out = []
    for m in read_all(kafka, kafka.topic(SESSION_EVENTS)):
        if (m.key() or b"").decode() == session_id:
            payload = codec.decode(m.value() or b"").payload
            if isinstance(payload, StepCaptured):
                out.append(payload.policy_version)
    return out


def _adopted(gateway: str, version: int) -> Callable[[], bool]:
    return lambda: httpx.get(f"{gateway}/admin/policy").json()["policy_version"] == version


def _calls(rollouts: Rollouts, more: int) -> Callable[[], bool]:
    """Whether ``more`` calls were sent since this was asked."""
    since = len(rollouts.answered)
    return lambda: len(rollouts.answered) >= since + more


def _until(what: str, ready: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.005)


def _stub_checkpoints(tmp: Path, marker: str) -> Callable[[int], Path]:
    """``checkpoint(version)`` for a fake server: a new folder ``r/v<version>`` under
    ``tmp`` holding only ``marker`` (``{}``), the file that names its kind of weights."""

    def checkpoint(version: int) -> Path:
        folder = tmp / "r" / f"v{version:06d}"
        folder.mkdir(parents=True)
        (folder / marker).write_text("{}")
        return folder

    return checkpoint


@contextmanager
def _server(kind: str, kafka: KafkaSettings, tmp: Path) -> Iterator[dict[str, Any]]:
    """The upstream of ``kind``: ``url``, ``model``, ``checkpoint(version) -> Path`` and the
    gateway settings it needs."""
    from rllm.models.loading import load_model
    from rllm.models.tiny import tiny_model_dir

    if kind == "vllm":
        from tests.fakes_training.vllm import FakeVllm

        adapter = _stub_checkpoints(tmp, "adapter_config.json")
        server = FakeVllm().serve()
        try:
            yield {"url": server.url, "model": "fake-model", "checkpoint": adapter}
        finally:
            server.stop()
        return
    tiny = tiny_model_dir(tmp / "tiny")
    from rllm.serving.engine import Engine

    engine = Engine(load_model(str(tiny)))
    if kind == "sglang":
        from tests.fakes_training.sglang import FakeSGLang

        folder = _stub_checkpoints(tmp, "config.json")
        server = ThreadedServer(FakeSGLang(engine=engine).app)
        extra = {"upstream_kind": "sglang", "tokenizer": str(tiny)}
        try:
            yield {"url": server.url, "model": "tiny", "checkpoint": folder, "gateway": extra}
        finally:
            server.stop()
        return
    from rllm.serving.app import create_app as serving_app
    from rllm.serving.updates import PolicyFollower

    weights = tmp / "weights"
    engine.model.save_pretrained(weights)

    def full(version: int) -> Path:
        return Path(shutil.copytree(weights, tmp / "r" / f"v{version:06d}"))

    follower = PolicyFollower(engine, kafka).start()  # rllm.serving's default poll
    server = ThreadedServer(serving_app(engine, model_name="tiny"), lifespan="on")
    try:
        yield {"url": server.url, "model": "tiny", "checkpoint": full}
    finally:
        server.stop()
        follower.stop()


def measure(kind: str, bootstrap: str, rounds: int) -> dict[str, Any]:
    """Publish ``rounds`` + 1 versions to a gateway in front of ``kind``; the latency of
    the first (its follower just started) apart, and of the others."""
    from rllm.producers.gateway.app import create_app
    from rllm.producers.gateway.settings import GatewaySettings

    kafka = KafkaSettings(bootstrap_servers=bootstrap, topic_prefix=f"ps{uuid.uuid4().hex[:6]}.")
    ensure_topics(kafka)
    with tempfile.TemporaryDirectory() as tmp_s, _server(kind, kafka, Path(tmp_s)) as up:
        settings = GatewaySettings(
            upstream_url=up["url"],
            spool_dir=Path(tmp_s) / "spool",
            spool_fsync=False,
            follow_policy_updates=True,
            insecure=True,
            **up.get("gateway", {}),
        )
        gw = ThreadedServer(create_app(settings, kafka), lifespan="on")
        published: list[float] = []
        try:
            with Rollouts(gw.url, up["model"]) as rollouts, EventPublisher(kafka) as pub:
                for version in range(1, rounds + 2):
                    uri = up["checkpoint"](version).as_uri()
                    record = PolicyUpdated(
                        event_id=uuid.uuid4().hex, run_id="r", version=version, checkpoint_uri=uri
                    )
                    published.append(time.monotonic())
                    pub.publish_sync(POLICY_UPDATES, "r", record)
                    _until(f"{kind}: v{version} never adopted", _adopted(gw.url, version))
                    _until(f"{kind}: no call after v{version}", _calls(rollouts, 2))
            stamps = _stamps(kafka, rollouts.session_id)
        finally:
            gw.stop()
    answered = rollouts.answered
    if len(stamps) != len(rollouts.answered):
        raise RuntimeError(f"{kind}: {len(rollouts.answered)} calls sent, {len(stamps)} steps read")
    if stamps != sorted(stamps):
        raise RuntimeError(f"{kind}: a step went back to an older version: {stamps}")
    latencies = []
    for version, at in enumerate(published, start=1):
        first = next(i for i, v in enumerate(stamps) if v >= version)
        if stamps[first] != version:
            raise RuntimeError(f"{kind}: no step was stamped with v{version}: {stamps}")
        latencies.append((answered[first] - at) * 1000)
    ms = np.array(latencies[1:])  # the first also waits for the gateway's follower to start
    call_ms = float(np.median(np.diff(answered)) * 1000) if len(answered) > 1 else 0.0
    return {
        "versions": rounds,
        "steps": len(stamps),
        "first_ms": round(latencies[0], 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "max_ms": round(float(ms.max()), 1),
        "call_interval_ms": round(call_ms, 1),
    }


def replicas(bootstrap: str, seconds: float, rate: float) -> dict[str, Any]:
    """``perf/gateway.py --replicas-only``'s summary (the figures with ``replica`` in name)."""
    cmd = [
        sys.executable,
        str(ROOT / "perf" / "gateway.py"),
        "--replicas-only",
        "--bootstrap",
        bootstrap,
        "--seconds",
        str(seconds),
        "--rate",
        str(rate),
        "--rounds",
        "2",
        "--py-spy",
        "off",
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"perf/gateway.py --replicas-only failed: {out.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return {k: v for k, v in summary.items() if "replica" in k}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bootstrap", default=None, help="Kafka host:port (default: start one)")
    p.add_argument("--rounds", type=int, default=10, help="versions published per kind")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: vllm,sglang,local")
    p.add_argument("--replicas-seconds", type=float, default=10.0, help="0: skip replicas")
    p.add_argument("--replicas-rate", type=float, default=200.0)
    p.add_argument("--short", action="store_true", help="3 versions, 4 s of replicas load")
    args = p.parse_args()
    if args.short:
        args.rounds, args.replicas_seconds = 3, min(args.replicas_seconds, 4.0)
    result: dict[str, Any] = {"rounds": args.rounds}
    with _broker(args.bootstrap) as bootstrap:
        for kind in args.kinds.split(","):
            began = time.monotonic()
            fig = measure(kind, bootstrap, args.rounds)
            result[kind] = fig
            print(
                f"{kind}: PolicyUpdated -> first step stamped p50 {fig['p50_ms']:.1f} ms, "
                f"max {fig['max_ms']:.1f} ms over {fig['versions']} versions (the first, "
                f"as the gateway starts: {fig['first_ms']:.0f} ms) "
                f"({fig['steps']} steps, a call every {fig['call_interval_ms']:.1f} ms; "
                f"{time.monotonic() - began:.0f} s)",
                flush=True,
            )
        if args.replicas_seconds > 0:
            result["replicas"] = replicas(bootstrap, args.replicas_seconds, args.replicas_rate)
            for key, value in result["replicas"].items():
                print(f"replicas: {key} = {value}", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
