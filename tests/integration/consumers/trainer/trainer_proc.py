"""Run the trainer in its own process; ``--crash POINT:VERSION`` kills it (os._exit) there.

Used by the crash-resume test: a real process death between update and commit.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rllm.consumers.backends import make_backend
from rllm.consumers.trainer.loop import Trainer
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.settings import KafkaSettings

CRASH_EXIT = 17


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--checkpoints", required=True)
    ap.add_argument("--crash", default="")
    ap.add_argument("--idle-exit", type=float, default=2.0)
    args = ap.parse_args()
    point, _, version = args.crash.partition(":")

    def fault(at: str, v: int) -> None:
        if at == point and v == int(version):
            os._exit(CRASH_EXIT)

    settings = TrainerSettings(
        model=args.model,
        checkpoint_dir=Path(args.checkpoints),
        run_id="crash-run",
        batch_size=2,
        idle_exit_s=args.idle_exit,
        poll_timeout_s=0.2,
        max_staleness=100,
        lr=1e-3,
        group_id="crash-trainer",
        keep_checkpoints=2,
    )
    kafka = KafkaSettings(bootstrap_servers=args.bootstrap, topic_prefix=args.prefix)
    report = Trainer(settings, kafka, make_backend(settings), fault=fault).run()
    print(json.dumps({"updates": report.updates, "version": report.version}))


if __name__ == "__main__":
    main()
