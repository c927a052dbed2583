"""The ``tinker`` backend: LoRA training on the Tinker service through the ``tinker`` SDK."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import tinker

from rllm.consumers.backends.remote import RemoteBackend, missing, remote_capabilities
from rllm.consumers.backends.tinker.datums import to_datums
from rllm.consumers.trainer.errors import TinkerError
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind, TrainBatch, UpdateResult

__all__ = ["TINKER_CAPABILITIES", "TinkerBackend", "tinker_errors"]

TINKER_CAPABILITIES = remote_capabilities(
    frozenset({LossKind.GRPO, LossKind.REINFORCE, LossKind.RLOO, LossKind.SFT}),
    frozenset(LossAgg),
)
_LOSS_FN: dict[LossKind, tinker.types.LossFnType] = {
    LossKind.GRPO: "ppo",
    LossKind.REINFORCE: "importance_sampling",
    LossKind.RLOO: "importance_sampling",
    LossKind.SFT: "cross_entropy",
}


@contextmanager
def tinker_errors(what: str) -> Iterator[None]:
    """Re-raise the SDK's errors (a refused request, a failed future, a result that could
    not be read) as ``TinkerError`` naming ``what``."""
    try:
        yield
    except tinker.APIStatusError as exc:
        raise TinkerError(f"Tinker {what} answered {exc.status_code}: {exc.message}") from exc
    except (tinker.TinkerError, ValueError) as exc:
        raise TinkerError(f"Tinker {what} failed: {exc}") from exc


class TinkerBackend(RemoteBackend):
    """Each update is the SDK's ``forward_backward`` then ``optim_step`` on one LoRA
    training client; checkpoints live on the service and the local checkpoint directory
    records their ``tinker://`` paths. ``close`` ends the service session."""

    name = "tinker"
    capabilities = TINKER_CAPABILITIES

    def __init__(self, settings: TrainerSettings) -> None:
        if settings.tinker_api_key is None:
            raise missing(self.name, "an API key (RLLM_TINKER_API_KEY)")
        if not settings.model:
            raise missing(self.name, "--model, the service's base model name")
        super().__init__(settings)
        self.service = tinker.ServiceClient(
            user_metadata={"run_id": settings.run_id},
            base_url=settings.tinker_url,
            api_key=settings.tinker_api_key.get_secret_value(),
        )
        with tinker_errors(f"create a LoRA training client on {settings.model}"):
            self.training = self.service.create_lora_training_client(
                base_model=settings.model, rank=settings.lora_rank
            ).result()
        self.sampler_path = ""

    def update(self, batch: TrainBatch) -> UpdateResult:
        """forward_backward then optim_step, both submitted before waiting for either."""
        loss_fn = _LOSS_FN[self.settings.loss]
        seqs = [s for s in batch.sequences if s.num_loss_tokens]
        if not seqs:
            raise TinkerError("Tinker update: the batch has no sequence with a loss token")
        datums = to_datums(seqs, loss_fn, self.settings.loss_agg)
        adam = tinker.AdamParams(learning_rate=self.settings.lr, beta1=0.9, beta2=0.95, eps=1e-12)
        with tinker_errors(f"update to v{self._version + 1}"):
            grads = self.training.forward_backward(datums, loss_fn)
            step = self.training.optim_step(adam)
            metrics = dict(grads.result().metrics)
            metrics.update(step.result().metrics or {})
        self._version += 1
        return UpdateResult(self._version, metrics)

    def save(self, directory: Path) -> str:
        """Save the training state and the sampler weights on the service; return the
        sampler weights' path."""
        name = f"{self.settings.run_id}-v{self._version:06d}"
        with tinker_errors(f"save {name}"):
            state = self.training.save_state(name)
            sampler = self.training.save_weights_for_sampler(name)
            state_path, self.sampler_path = state.result().path, sampler.result().path
        self._write_record(directory, {"state_path": state_path, "sampler_path": self.sampler_path})
        return self.sampler_path

    def load(self, directory: Path, version: int) -> None:
        """Continue from the state recorded in ``directory``: a new training client made
        from it, with its optimizer state."""
        paths = self._read_record(directory)
        with tinker_errors(f"load {paths['state_path']}"):
            self.training = self.service.create_training_client_from_state_with_optimizer(
                paths["state_path"]
            ).result()
        self.sampler_path = paths["sampler_path"]
        self._version = version

    def close(self, status: Literal["success", "errored", "interrupted"] = "success") -> None:
        """Finish the service session (its heartbeats stop)."""
        with tinker_errors("finish the session"):
            self.service.close(status).result()
