"""Contracts of the trainer: algorithms, training sequences and batches, the backend Protocol
and the capability declaration every backend makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rllm.consumers.trainer.errors import CapabilityError
from rllm.schemas.types import Estimator

if TYPE_CHECKING:
    from rllm.consumers.trainer.settings import TrainerSettings

__all__ = [
    "Capabilities",
    "LossAgg",
    "LossKind",
    "StepSampling",
    "TrainBatch",
    "TrainSequence",
    "TrainingBackend",
    "UpdateResult",
    "check_capabilities",
    "check_sampling",
]


class LossKind(StrEnum):
    """The training objective."""

    GRPO = "grpo"
    """Clipped surrogate with the importance ratio against the rollout logprobs."""
    REINFORCE = "reinforce"
    """Plain policy gradient weighted by the ``reinforce`` advantage: the trajectory
    reward minus a constant baseline (not verl's REINFORCE++: that is the estimator
    ``reinforce_plus_plus`` under loss=grpo)."""
    RLOO = "rloo"
    """Policy gradient weighted by the processors' (leave-one-out) advantages."""
    SFT = "sft"
    """Cross-entropy on the sampled tokens."""
    DISTILL = "distill"
    """On-policy distillation: teacher minus student logprob as per-token advantage."""


class LossAgg(StrEnum):
    """How per-token losses become one number."""

    TOKEN_MEAN = "token-mean"
    """Mean over every loss token of the batch."""
    SEQ_MEAN_TOKEN_MEAN = "seq-mean-token-mean"
    """Mean over sequences of each sequence's token mean."""
    SEQ_MEAN_TOKEN_SUM = "seq-mean-token-sum"
    """Mean over sequences of each sequence's token sum."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can honour; anything else is refused before training starts."""

    losses: frozenset[LossKind]
    """Objectives it implements."""
    loss_aggs: frozenset[LossAgg]
    """Loss aggregations it implements."""
    kl: bool
    """Whether a KL penalty to a reference policy is supported."""
    clipping: bool
    """Whether the ratio clip range can be set."""
    lora: bool
    """Whether LoRA adapters (``lora_rank > 0``) are supported."""
    full_finetune: bool = True
    """Whether all weights can be trained (``lora_rank == 0``)."""
    precisions: frozenset[str] = frozenset({"fp32"})
    """``precision`` values it honours (the local backend's setting)."""
    estimators: frozenset[Estimator] | None = None
    """Advantage estimators it can train on (None: every one; ``run_estimator``)."""
    sampling: frozenset[str] = frozenset()
    """Sampling parameters it scores with (``StepSampling`` fields: temperature, top_p,
    top_k); a step sampled with another one at a non-default value is refused, since its
    importance ratio would compare two different distributions."""


@dataclass(frozen=True)
class StepSampling:
    """How a step's tokens were sampled, as far as it shapes their distribution; the
    trainer scores them with the same (``rllm.models.sampling.sampled_logprobs``)."""

    temperature: float = 1.0
    """Logits were divided by it (0: greedy, scored with the raw distribution)."""
    top_p: float = 1.0
    """Nucleus cut (1: none)."""
    top_k: int = 0
    """Top-k cut (0: none)."""

    def non_default(self) -> dict[str, float]:
        """The fields that differ from plain temperature-1 sampling, by name."""
        base = StepSampling()
        return {
            k: getattr(self, k)
            for k in ("temperature", "top_p", "top_k")
            if getattr(self, k) != getattr(base, k)
        }


@dataclass
class TrainSequence:
    """One training sequence: a full prompt + response, with which tokens carry loss.

    All per-token lists have the length of ``input_ids``; entries where ``loss_mask`` is 0
    are ignored. ``logprobs_T[t]`` is the rollout logprob of token ``input_ids[t]``.
    """

    episode_id: str
    """The episode the sequence came from."""
    session_id: str
    """The trajectory (session) it came from."""
    step_ids: tuple[str, ...]
    """Steps merged into it."""
    input_ids_T: list[int]
    """Token IDs, prompt then response (then further turns when merged)."""
    loss_mask_T: list[int]
    """1 for tokens the model sampled, 0 for prompts and tool output."""
    logprobs_T: list[float]
    """Rollout logprob of each sampled token (0.0 elsewhere)."""
    advantage: float = 0.0
    """Trajectory advantage, broadcast over its tokens."""
    policy_version: int = 0
    """Oldest policy version among its steps."""
    teacher_logprobs_T: list[float] | None = None
    """Teacher logprobs of each token, for distillation."""
    sampling: StepSampling = field(default_factory=StepSampling)
    """How its steps were sampled (steps merge only when it is the same)."""

    @property
    def num_loss_tokens(self) -> int:
        """Tokens that carry loss."""
        return sum(self.loss_mask_T)


@dataclass
class TrainBatch:
    """One update's worth of sequences and where they came from."""

    sequences: list[TrainSequence]
    """The sequences."""
    episode_ids: list[str]
    """Episodes in the batch, in consumption order."""
    rewards: list[float] = field(default_factory=list)
    """Rewards of the trajectories in the batch."""

    @property
    def num_tokens(self) -> int:
        """Tokens that carry loss."""
        return sum(s.num_loss_tokens for s in self.sequences)


@dataclass(frozen=True)
class UpdateResult:
    """What one backend update produced."""

    version: int
    """The new policy version."""
    metrics: dict[str, float]
    """Loss, KL, clip fraction, timings, ..."""


@runtime_checkable
class TrainingBackend(Protocol):
    """A training backend: turns batches into weight updates and checkpoints."""

    name: str
    capabilities: Capabilities

    @property
    def version(self) -> int:
        """Current policy version."""
        ...

    @property
    def base_model(self) -> str:
        """The model the policy started from."""
        ...

    def update(self, batch: TrainBatch) -> UpdateResult:
        """Apply one optimiser step on the batch; return the new version and metrics."""
        ...

    def save(self, directory: Path) -> str:
        """Write weights and optimiser state under ``directory``; return the checkpoint URI."""
        ...

    def load(self, directory: Path, version: int) -> None:
        """Restore weights and optimiser state saved by ``save``."""
        ...

    def close(self) -> None:
        """Release what the backend holds outside this process (a hosted service's
        session); called once, by whoever built it, when training ends."""
        ...


def check_sampling(sampling: Mapping[str, Any], backend: str, caps: Capabilities) -> None:
    """Refuse rollout sampling parameters (``temperature``, ``top_p``, ``top_k``) the
    backend cannot score with, before any rollout runs: its importance ratios would compare
    the sampled distribution with another one, and every episode would be refused later.

    Raises:
        CapabilityError: naming each such parameter, its value and the backend.
    """
    asked = StepSampling(
        temperature=float(sampling.get("temperature", 1.0)),
        top_p=float(sampling.get("top_p", 1.0)),
        top_k=int(sampling.get("top_k", 0) or 0),
    ).non_default()
    refused = {k: v for k, v in asked.items() if k not in caps.sampling}
    if refused:
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(refused.items()))
        raise CapabilityError(
            f"backend {backend!r} scores tokens only as sampled at temperature 1 without "
            f"truncation, but the rollouts would sample with {shown}: their importance "
            f"ratios would be wrong, so every episode would be refused. Sample with "
            f"temperature 1 (top_p 1, top_k 0) or train with --backend local"
        )


def check_capabilities(settings: TrainerSettings, backend: str, caps: Capabilities) -> None:
    """Refuse settings the backend cannot honour, naming the setting and the backend.

    Raises:
        CapabilityError: on the first setting that cannot be honoured.
    """
    problems: list[str] = []
    if settings.loss not in caps.losses:
        problems.append(
            f"loss={settings.loss.value} (supported: "
            f"{', '.join(sorted(x.value for x in caps.losses))})"
        )
    if settings.loss_agg not in caps.loss_aggs:
        problems.append(
            f"loss_agg={settings.loss_agg.value} (supported: "
            f"{', '.join(sorted(x.value for x in caps.loss_aggs))})"
        )
    estimator = settings.run_estimator()
    if estimator is not None and caps.estimators is not None and (estimator not in caps.estimators):
        problems.append(f"estimator={estimator} (supported: {', '.join(sorted(caps.estimators))})")
    if settings.kl_coef > 0 and not caps.kl:
        problems.append(f"kl_coef={settings.kl_coef} (no KL penalty)")
    default_clip = settings.clip_eps_low == 0.2 and settings.clip_eps_high == 0.2
    if not caps.clipping and not default_clip:
        problems.append(
            f"clip_eps_low={settings.clip_eps_low}/clip_eps_high="
            f"{settings.clip_eps_high} (clip range is fixed)"
        )
    if not caps.clipping and settings.clip_ratio_c != 3.0:
        problems.append(f"clip_ratio_c={settings.clip_ratio_c} (clip range is fixed)")
    if settings.lora_rank > 0 and not caps.lora:
        problems.append(f"lora_rank={settings.lora_rank} (no LoRA)")
    if settings.lora_rank == 0 and not caps.full_finetune:
        problems.append("lora_rank=0 (full fine-tuning not offered; set lora_rank > 0)")
    if settings.precision.value not in caps.precisions:
        problems.append(
            f"precision={settings.precision.value} (supported: "
            f"{', '.join(sorted(caps.precisions))}; the service chooses its own arithmetic)"
        )
    if problems:
        raise CapabilityError(
            f"backend {backend!r} cannot honour: {'; '.join(problems)}. Change the setting "
            f"or choose another --backend."
        )
