"""``python -m tests.integration.history_caught_up``: wait until the history sink has
committed every record of the session log, so that an ``rllm-cli analytics`` run next sees
what the commands before it did (as it would for a person typing the next line).

The broker, topic prefix and the sink's consumer group come from the ``RLLM_*``
environment, as the services read them. Only the session log is awaited: the processors
write the other topics in transactions, whose commit markers take offsets that no record
consumed ever reaches.
"""

from __future__ import annotations

import sys
import time

from rllm.consumers.history.settings import HistorySettings
from rllm.kafka import group_lag
from rllm.schemas.topics import SESSION_EVENTS
from rllm.settings import KafkaSettings


def main(timeout_s: float = 60.0) -> int:
    """Exit 0 once the sink is caught up, 1 (naming the lag) after ``timeout_s``."""
    kafka = KafkaSettings()
    group = HistorySettings().history_group_id
    topic = kafka.topic(SESSION_EVENTS)
    deadline = time.monotonic() + timeout_s
    behind = group_lag(kafka, group, topic)
    while behind:
        if time.monotonic() > deadline:
            print(f"history group {group} still behind on {topic}: {behind}", file=sys.stderr)
            return 1
        time.sleep(0.2)  # polls the committed offsets, the sink's own signal
        behind = group_lag(kafka, group, topic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
