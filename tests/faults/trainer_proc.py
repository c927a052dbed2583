"""The trainer consumer in its own process, on a tiny model whose vocabulary covers the fake
upstream's tokens (UTF-8 bytes plus 3).

``--pause-at POINT:VERSION`` stops the trainer at that fault point (``after_update``,
``after_checkpoint``, ``after_publish``, ``after_commit`` of an update): it writes
``--marker`` and waits there for the SIGKILL the fault table sends, so the kill lands
between update and commit without a race. SIGTERM stops it cleanly.

    python -m tests.faults.trainer_proc --model DIR --checkpoints DIR [--pause-at ...]
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from rllm.settings import KafkaSettings

RUN_ID = "faults"
"""The training run: checkpoints under ``<checkpoints>/faults``."""
GROUP_ID = "faults-trainer"
"""The trainer's consumer group."""
BATCH = 2
"""Episodes per update."""
VOCAB = 320
"""Model vocabulary: the fake tokenizer's IDs go up to 258."""


def byte_model_dir(directory: Path) -> Path:
    """``tiny_model_dir``'s random Llama with its vocabulary grown to ``VOCAB`` and room for
    2,048 positions, written once to ``directory`` (a marker file is written last)."""
    done = directory / "faults-model.done"
    if done.is_file():
        return directory
    import transformers

    from rllm.models.tiny import tiny_model_dir

    tiny_model_dir(directory)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    model.resize_token_embeddings(VOCAB)
    model.config.max_position_embeddings = 2048
    model.save_pretrained(directory)
    done.write_text("ok\n")
    return directory


def main() -> None:
    """Parse the flags, build the trainer and run it until SIGTERM."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="created here on first use")
    ap.add_argument("--checkpoints", type=Path, required=True)
    ap.add_argument("--pause-at", default="", help="POINT:VERSION, e.g. after_checkpoint:2")
    ap.add_argument("--marker", type=Path, help="written when the trainer pauses")
    args = ap.parse_args()
    point, _, version = args.pause_at.partition(":")

    from rllm.consumers.backends import make_backend
    from rllm.consumers.trainer.loop import Trainer
    from rllm.consumers.trainer.settings import TrainerSettings

    def fault(at: str, v: int) -> None:
        if point and at == point and v == int(version):
            assert args.marker is not None, "--pause-at needs --marker"
            args.marker.write_text(f"{at}:{v}\n")
            threading.Event().wait()  # until the SIGKILL

    settings = TrainerSettings(
        model=str(byte_model_dir(args.model)),
        checkpoint_dir=args.checkpoints,
        run_id=RUN_ID,
        group_id=GROUP_ID,
        batch_size=BATCH,
        max_staleness=1_000_000,  # the gateway stamps no versions: nothing is stale
        uniform_reward="keep",
        lr=1e-3,
        poll_timeout_s=0.2,
        torch_threads=1,
        save_optimizer=False,
    )
    trainer = Trainer(settings, KafkaSettings(), make_backend(settings), fault=fault)
    signal.signal(signal.SIGTERM, lambda *_: trainer.stop())
    report = trainer.run()
    print(json.dumps({"updates": report.updates, "version": report.version}), flush=True)


if __name__ == "__main__":
    main()
