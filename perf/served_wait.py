"""How soon a sync run's wait for a served version ends after the gateway's
``PolicyServed`` reaches the broker: ``GatewayServes`` following ``rllm.policy-updates``
on a real broker (topics of their own, under a random prefix), the gateway's id known.

``python perf/served_wait.py --bootstrap 127.0.0.1:9092 --rounds 50`` prints the publish ->
wake latency (median, p90, max) and the HTTP questions asked (0: the topic ended every
wait). The HTTP poll it replaced asked ``GET /admin/policy`` every 20 ms (10 ms late on
average, each question also one ``/health`` call to the upstream).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

from rllm.app.served import GatewayServes
from rllm.kafka import EventPublisher, ensure_topics
from rllm.schemas.policy import PolicyServed
from rllm.schemas.topics import POLICY_UPDATES
from rllm.settings import KafkaSettings

NOWHERE = "http://127.0.0.1:9"
"""No gateway: an HTTP question would fail, so only the topic ends a wait."""


def _served(version: int) -> PolicyServed:
    return PolicyServed(event_id=f"gw/r/v{version}", gateway_id="gw", run_id="r", version=version)


def measure(kafka: KafkaSettings, rounds: int) -> dict[str, Any]:
    """Publish ``rounds`` PolicyServed records, each 50 ms into a wait for it."""
    ensure_topics(kafka)
    served = GatewayServes(NOWHERE, "r", kafka)
    served.gateway_id = "gw"  # as GET /admin/policy would name it
    trainer: Any = SimpleNamespace(failure=None)
    latencies: list[float] = []
    try:
        with EventPublisher(kafka) as pub:
            pub.publish_sync(POLICY_UPDATES, "r", _served(0))  # the follower joins and reads
            if not served.wait(0, time.monotonic() + 60, trainer):
                raise SystemExit("the follower never read the first record")
            for version in range(1, rounds + 1):
                sent: list[float] = []

                def publish(v: int = version, at: list[float] = sent) -> None:
                    time.sleep(0.05)
                    at.append(time.monotonic())
                    pub.publish(POLICY_UPDATES, "r", _served(v))
                    pub.flush()

                thread = threading.Thread(target=publish)
                thread.start()
                if not served.wait(version, time.monotonic() + 30, trainer):
                    raise SystemExit(f"version {version}: no wake within 30 s")
                latencies.append(time.monotonic() - sent[0])
                thread.join()
    finally:
        served.close()
    latencies.sort()
    return {
        "rounds": rounds,
        "wake_ms_median": round(statistics.median(latencies) * 1000, 2),
        "wake_ms_p90": round(latencies[int(0.9 * (len(latencies) - 1))] * 1000, 2),
        "wake_ms_max": round(latencies[-1] * 1000, 2),
        "http_questions": served.asked,
    }


def main() -> None:
    """Parse the flags, measure, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="a running broker")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    prefix = f"perf-served-{uuid.uuid4().hex[:8]}."
    kafka = KafkaSettings(bootstrap_servers=args.bootstrap, topic_prefix=prefix)
    print(json.dumps(measure(kafka, args.rounds)))


if __name__ == "__main__":
    main()
