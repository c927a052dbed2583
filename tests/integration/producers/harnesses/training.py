"""What the ``rllm-cli train --tasks-dir`` tests share: the tiny model, the train command
run beside a processors worker against the test's gateway, and the records of a run read
back from a topic."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from click.testing import CliRunner, Result

from rllm.cli.main import cli
from rllm.sandboxes import SandboxSettings
from rllm.schemas.codec import AvroCodec
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import read_all
from tests.integration.processors.helpers import Workers
from tests.paths import HARBOR_TASKS as TASKS

__all__ = ["TrainOnTasks", "run_records", "tiny_model"]


class _OfRun(Protocol):
    run_id: str


R = TypeVar("R", bound=_OfRun)


def tiny_model(directory: Path, heads: int = 4, hidden: int = 32, positions: int = 8192) -> Path:
    """The tiny test model, widened to the scripted model's token ids (bytes + 3) and to
    the harness's prompts."""
    import transformers

    from rllm.models.tiny import tiny_model_dir

    tf: Any = transformers  # untyped
    tiny_model_dir(directory)
    config = tf.LlamaConfig(
        vocab_size=320,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=1,
        num_attention_heads=heads,
        num_key_value_heads=min(2, heads),
        max_position_embeddings=positions,
        eos_token_id=1,
        pad_token_id=0,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    tf.LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def run_records(kafka: KafkaSettings, topic: str, kind: type[R], run_id: str) -> list[R]:
    """The records of ``kind`` on ``topic`` (this test's) of run ``run_id``, in order."""
    codec = AvroCodec()
    records = [codec.decode(m.value() or b"") for m in read_all(kafka, kafka.topic(topic))]
    return [r for r in records if isinstance(r, kind) and r.run_id == run_id]


@dataclass(frozen=True)
class TrainOnTasks:
    """``rllm-cli train`` on this test's broker, sandbox home and gateway (started to
    follow policy updates), with a processors worker running beside it."""

    kafka: KafkaSettings
    start_gateway: Callable[..., ThreadedServer]
    sandbox_settings: SandboxSettings
    tmp_path: Path

    def tasks(self, *names: str) -> Path:
        """A tasks folder with copies of the shipped tasks ``names``."""
        folder = self.tmp_path / "tasks"
        for name in names:
            shutil.copytree(TASKS / name, folder / name)
        return folder

    def __call__(self, tasks: Path, agent: str, run_id: str, model: Path) -> Result:
        """``rllm-cli train --tasks-dir TASKS --agent AGENT`` (groups of 2, a task per
        batch, 2 epochs)."""
        gateway = self.start_gateway(follow_policy_updates=True)
        kafka, tmp_path = self.kafka, self.tmp_path
        workers = Workers(kafka, tmp_path)
        workers.start()
        env = {
            "RLLM_SANDBOX_HOME": str(self.sandbox_settings.home),
            "RLLM_SANDBOX_BACKEND": "local",
        }
        try:
            return CliRunner().invoke(
                cli,
                [
                    "train",
                    "--tasks-dir",
                    str(tasks),
                    "--agent",
                    agent,
                    "--group-size",
                    "2",
                    "--batch-size",
                    "1",
                    "--epochs",
                    "2",
                    "--uniform-reward",
                    "keep",
                    "--model",
                    str(model),
                    "--served-model",
                    "scripted",
                    "--lr",
                    "0.01",
                    "--checkpoint-dir",
                    str(tmp_path / "ckpt"),
                    "--run-id",
                    run_id,
                    "--gateway-url",
                    gateway.url,
                    "-b",
                    kafka.bootstrap_servers,
                    "--topic-prefix",
                    kafka.topic_prefix,
                ],
                env=env,
                catch_exceptions=False,
            )
        finally:
            workers.close()
