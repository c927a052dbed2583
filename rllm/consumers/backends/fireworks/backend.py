"""The ``fireworks`` backend: each update is a LoRA supervised fine-tuning job on the batch,
warm-started from the previous version and hot-loaded onto a deployment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from rllm.consumers.backends.fireworks.client import FireworksClient
from rllm.consumers.backends.remote import RemoteBackend, missing, remote_capabilities
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind, TrainBatch, UpdateResult
from rllm.errors import ConfigError

__all__ = ["FIREWORKS_CAPABILITIES", "FireworksBackend"]

FIREWORKS_CAPABILITIES = remote_capabilities(
    frozenset({LossKind.SFT}), frozenset({LossAgg.TOKEN_MEAN})
)


class FireworksBackend(RemoteBackend):
    """SFT on Fireworks; ``detokenize`` turns token IDs back into message text."""

    name = "fireworks"
    capabilities = FIREWORKS_CAPABILITIES

    def __init__(
        self,
        settings: TrainerSettings,
        detokenize: Callable[[list[int]], str] | None = None,
        deployment: str = "",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if settings.fireworks_api_key is None or not settings.fireworks_account:
            raise missing(self.name, "RLLM_FIREWORKS_API_KEY and RLLM_FIREWORKS_ACCOUNT")
        if detokenize is None:
            raise ConfigError("backend 'fireworks' trains on text: give it a detokenizer")
        super().__init__(settings)
        self.detokenize, self.deployment = detokenize, deployment
        self.client = FireworksClient(
            settings.fireworks_url,
            settings.fireworks_api_key.get_secret_value(),
            settings.fireworks_account,
            transport=transport,
            poll_s=0.01,
        )
        self.model_name = ""

    def update(self, batch: TrainBatch) -> UpdateResult:
        """Upload the batch as chat rows, fine-tune, hot-load."""
        rows = []
        for s in batch.sequences:
            first = s.loss_mask_T.index(1) if 1 in s.loss_mask_T else len(s.input_ids_T)
            rows.append(
                {
                    "messages": [
                        {"role": "user", "content": self.detokenize(s.input_ids_T[:first])},
                        {"role": "assistant", "content": self.detokenize(s.input_ids_T[first:])},
                    ]
                }
            )
        version = self._version + 1
        tag = f"{self.settings.run_id}-v{version}".lower().replace("_", "-")
        dataset = self.client.upload_dataset(tag, rows)
        output = f"accounts/{self.settings.fireworks_account}/models/{tag}"
        self.client.fine_tune(
            tag,
            dataset,
            self.settings.model,
            output,
            self.settings.lora_rank,
            self.settings.lr,
            warm_start=self.model_name or None,
        )
        if self.deployment:
            self.client.hot_load(output, self.deployment)
        self.model_name, self._version = output, version
        return UpdateResult(version, {"rows": float(len(rows))})

    def save(self, directory: Path) -> str:
        """The model lives on Fireworks; record its name locally."""
        self._write_record(directory, {"model": self.model_name})
        return f"fireworks://{self.model_name}"

    def load(self, directory: Path, version: int) -> None:
        """Resume from the recorded model name."""
        self.model_name = self._read_record(directory)["model"]
        self._version = version
