"""The ``tinker`` backend: LoRA training on the Tinker service."""

from __future__ import annotations

from pathlib import Path

import httpx

from rllm.consumers.backends.remote import RemoteBackend, missing, remote_capabilities
from rllm.consumers.backends.tinker.client import TinkerClient, to_datums
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind, TrainBatch, UpdateResult

__all__ = ["TINKER_CAPABILITIES", "TinkerBackend"]

TINKER_CAPABILITIES = remote_capabilities(
    frozenset({LossKind.GRPO, LossKind.REINFORCE, LossKind.RLOO, LossKind.SFT}),
    frozenset(LossAgg),
)
_LOSS_FN = {
    LossKind.GRPO: "ppo",
    LossKind.REINFORCE: "importance_sampling",
    LossKind.RLOO: "importance_sampling",
    LossKind.SFT: "cross_entropy",
}


class TinkerBackend(RemoteBackend):
    """Each update is forward_backward + optim_step; checkpoints live on the service and
    the local checkpoint directory records their ``tinker://`` paths."""

    name = "tinker"
    capabilities = TINKER_CAPABILITIES

    def __init__(
        self, settings: TrainerSettings, transport: httpx.BaseTransport | None = None
    ) -> None:
        if settings.tinker_api_key is None:
            raise missing(self.name, "an API key (RLLM_TINKER_API_KEY)")
        if not settings.model:
            raise missing(self.name, "--model, the service's base model name")
        super().__init__(settings)
        self.client = TinkerClient(
            settings.tinker_url, settings.tinker_api_key.get_secret_value(), transport=transport
        )
        self.client.create_model(settings.model, settings.lora_rank)
        self.sampler_path = ""

    def update(self, batch: TrainBatch) -> UpdateResult:
        """forward_backward then optim_step."""
        loss_fn = _LOSS_FN[self.settings.loss]
        datums = to_datums(
            [s for s in batch.sequences if s.num_loss_tokens], loss_fn, self.settings.loss_agg
        )
        res = self.client.forward_backward(datums, loss_fn)
        self.client.optim_step(self.settings.lr)
        self._version += 1
        metrics = {
            k: float(v) for k, v in res.get("metrics", {}).items() if isinstance(v, int | float)
        }
        return UpdateResult(self._version, metrics)

    def save(self, directory: Path) -> str:
        """Save state and sampler weights on the service; return the sampler path."""
        name = f"{self.settings.run_id}-v{self._version:06d}"
        state = self.client.save_weights(name)
        self.sampler_path = self.client.save_weights_for_sampler(name)
        self._write_record(directory, {"state_path": state, "sampler_path": self.sampler_path})
        return self.sampler_path

    def load(self, directory: Path, version: int) -> None:
        """Restore the service-side state recorded in ``directory``."""
        paths = self._read_record(directory)
        self.client.load_weights(paths["state_path"])
        self.sampler_path = paths["sampler_path"]
        self._version = version
