"""The history service in its own process (chDB directory, query socket, sink), as
``rllm-cli history`` composes it, with the sink's ``after_insert`` hook exposed.

``--pause-batch N`` stops the sink after it inserted its N-th batch and before it commits
that batch's offsets: it writes ``--marker`` and waits there for the SIGKILL the fault
table sends. SIGTERM stops it cleanly.

    python -m tests.faults.history_proc --dir DIR [--pause-batch N --marker FILE]
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.service import serve_queries
from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.sink import HistorySink
from rllm.settings import KafkaSettings


def main() -> None:
    """Parse the flags and sink until SIGTERM."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True, help="the chDB directory")
    ap.add_argument("--pause-batch", type=int, default=0, help="0: never pause")
    ap.add_argument("--marker", type=Path, help="written when the sink pauses")
    args = ap.parse_args()
    settings = HistorySettings(history_dir=args.dir, history_batch_s=0.5)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def after_insert(batches_before: int) -> None:
        if args.pause_batch and batches_before + 1 == args.pause_batch:
            assert args.marker is not None, "--pause-batch needs --marker"
            args.marker.write_text(f"inserted batch {args.pause_batch}, not committed\n")
            threading.Event().wait()  # until the SIGKILL

    store = ChdbStore(settings.history_dir, settings.history_database)
    store.create_schema()
    server = serve_queries(settings.socket_path, store)
    try:
        sink = HistorySink(KafkaSettings(), settings, store, after_insert=after_insert)
        sink.run(stop=stop)
    finally:
        server.stop()
        store.close()


if __name__ == "__main__":
    main()
