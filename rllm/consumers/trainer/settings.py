"""``TrainerSettings``: every knob of ``rllm-cli train``, env prefix ``RLLM_``; the fields
the model server or the processors have too read ``RLLM_TRAIN_*`` (one variable, one
field)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from rllm.consumers.trainer.types import LossAgg, LossKind
from rllm.errors import ConfigError
from rllm.models.threads import ThreadsSetting
from rllm.schemas.types import Estimator
from rllm.settings import MovedEnv, OwnEnvSettings, default_home, model_env

__all__ = [
    "LOSS_ESTIMATORS",
    "BackendName",
    "Precision",
    "SyncMode",
    "TeacherApi",
    "TrainerSettings",
    "UniformPolicy",
]


LOSS_ESTIMATORS: dict[LossKind, tuple[Estimator, ...]] = {
    LossKind.GRPO: (
        Estimator.GRPO,
        Estimator.RLOO,
        Estimator.REINFORCE_PLUS_PLUS,
        Estimator.REINFORCE_PLUS_PLUS_BASELINE,
    ),
    LossKind.RLOO: (Estimator.RLOO,),
    LossKind.REINFORCE: (Estimator.REINFORCE,),
}
"""Advantage estimators each loss trains on, its default first (sft and distill use none)."""


class BackendName(StrEnum):
    """Training backends, chosen with ``--backend``."""

    LOCAL = "local"
    VERL = "verl"
    TINKER = "tinker"
    FIREWORKS = "fireworks"


class Precision(StrEnum):
    """Arithmetic of the local backend's forward and backward passes."""

    FP32 = "fp32"
    BF16 = "bf16"
    """bfloat16 activations and gradients on a bfloat16 copy of the weights; the weights
    AdamW updates (and checkpoints) stay float32."""


class SyncMode(StrEnum):
    """How rollouts and updates interleave."""

    SYNC = "sync"
    """Only episodes sampled by the current policy are trained (staleness 0)."""
    ASYNC = "async"
    """Episodes up to ``max_staleness`` versions old are trained."""


class TeacherApi(StrEnum):
    """How a served teacher is asked for the logprobs of given tokens."""

    VLLM = "vllm"
    """``POST /v1/completions`` with ``prompt_logprobs`` (vLLM, ``rllm-cli serve``)."""
    SGLANG = "sglang"
    """``POST /generate`` with ``return_logprob`` and ``logprob_start_len`` (SGLang)."""


class UniformPolicy(StrEnum):
    """What to do with groups whose rewards are all equal."""

    DROP = "drop"
    KEEP = "keep"


class TrainerSettings(OwnEnvSettings):
    """The trainer consumer and its backend."""

    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="ignore")
    owner: ClassVar[str] = "the trainer"
    moved_env: ClassVar[tuple[MovedEnv, ...]] = (
        *model_env("TRAIN"),
        MovedEnv(
            "estimator", "RLLM_TRAIN_ESTIMATOR", "RLLM_ESTIMATOR", "the processors' estimator"
        ),
    )

    # --- run ------------------------------------------------------------------------
    run_id: str = "train"
    """Training run id, written on every PolicyUpdated."""
    group_id: str = "rllm-trainer"
    """Kafka consumer group of the trainer."""
    episode_run_ids: tuple[str, ...] = ()
    """Train only on episodes of these rollout runs (empty: every episode on the topic;
    AgentTrainer sets its own run id so eval runs and older runs are not trained on)."""
    backend: BackendName = BackendName.LOCAL
    """Training backend (local, verl, tinker, fireworks)."""
    checkpoint_dir: Path = Field(default_factory=lambda: default_home() / "checkpoints")
    """Where checkpoints (weights, optimiser state, consumed offsets) go."""
    keep_checkpoints: int = Field(default=2, ge=1)
    """How many recent checkpoints to keep on disk."""
    max_updates: int = Field(default=0, ge=0)
    """Stop after this many policy updates made (0: run until stopped); episodes dropped
    make no update and do not count."""
    poll_timeout_s: float = Field(default=1.0, gt=0)
    """How long one Kafka poll waits."""
    idle_exit_s: float = Field(default=0.0, ge=0)
    """Stop when no episode arrived for this long (0: never)."""

    # --- batching -------------------------------------------------------------------
    batch_size: int = Field(default=4, ge=1)
    """Episodes (tasks) per update; each brings its whole group."""
    min_flush_episodes: int = Field(default=1, ge=1)
    """A driver's flush (``Trainer.flush_after``, sync runs) trains the pending batch only
    when it holds this many kept episodes; fewer wait for the next batch's, which the
    driver samples on the same version, so they stay on-policy (DAPO's dynamic sampling).
    Uniform groups dropped leave a flushed batch short, and AdamW moves the weights as far
    on one group as on a full batch."""
    mode: SyncMode = SyncMode.ASYNC
    """sync: train only on-policy episodes; async: allow up to max_staleness."""
    max_staleness: int = Field(default=1, ge=0)
    """Largest (current version - step policy version) accepted in async mode."""
    uniform_reward: UniformPolicy = UniformPolicy.DROP
    """drop: leave out groups whose rewards are all equal (a group-centred estimator gives
    them zero advantage: no GRPO signal); keep: train on them anyway, so a batch of only
    such groups still makes an update (its optimiser step, with the KL term and weight
    decay, and a new policy version)."""
    merge_steps: bool = True
    """Merge steps whose prompt extends the previous step's prompt + response."""

    # --- algorithm ------------------------------------------------------------------
    loss: LossKind = LossKind.GRPO
    """Objective: grpo, reinforce, rloo, sft, distill."""
    loss_agg: LossAgg = LossAgg.TOKEN_MEAN
    """token-mean, seq-mean-token-mean or seq-mean-token-sum."""
    clip_eps_low: float = Field(default=0.2, ge=0, lt=1)
    """Lower clip range of the importance ratio, in [0, 1): the ratio is clipped at
    ``1 - clip_eps_low``, which must stay above 0."""
    clip_eps_high: float = Field(default=0.2, ge=0)
    """Upper clip range of the importance ratio."""
    clip_ratio_c: float = Field(default=3.0, gt=1)
    """Dual-clip bound for negative advantages (verl's ``clip_ratio_c``): the loss of a
    token with A < 0 is at most ``-clip_ratio_c * A``."""
    kl_coef: float = Field(default=0.0, ge=0)
    """Weight of the KL penalty to the reference (initial) policy; 0 turns it off."""
    estimator: Estimator | None = None
    """Advantage estimator every episode of the run must carry (``RLLM_TRAIN_ESTIMATOR``;
    None: the loss's own,
    ``grpo``, ``rloo`` or ``reinforce``); loss=grpo also takes ``rloo``,
    ``reinforce_plus_plus`` and ``reinforce_plus_plus_baseline`` (verl's clipped PPO loss
    on those advantages)."""

    # --- optimiser and model --------------------------------------------------------
    model: str = ""
    """Local HF model directory, or a directory holding ``gguf_file``
    (``RLLM_TRAIN_MODEL``); '' = SmolLM2-135M."""
    gguf_file: str | None = None
    """GGUF file name inside ``model`` (or a full path; ``RLLM_TRAIN_GGUF_FILE``)."""
    teacher_model: str | None = None
    """Local teacher model directory for distillation (or ``teacher_url``)."""
    lr: float = Field(default=2e-5, gt=0)
    """AdamW learning rate."""
    weight_decay: float = Field(default=0.0, ge=0)
    """AdamW weight decay."""
    max_grad_norm: float = Field(default=1.0, gt=0)
    """Gradient clipping norm."""
    micro_batch_size: int = Field(default=8, ge=1)
    """Sequences per forward/backward pass (gradients are accumulated)."""
    lora_rank: int = Field(default=0, ge=0)
    """LoRA rank; 0 trains all weights."""
    device: str = "cpu"
    """torch device of the local backend (``RLLM_TRAIN_DEVICE``)."""
    precision: Precision = Precision.FP32
    """Local backend: ``bf16`` computes in bfloat16 with float32 master weights (AMX CPUs
    and GPUs run it several times faster; logprobs then differ from float32 in the
    second or third digit)."""
    seed: int = 0
    """Seed of the local backend."""
    torch_threads: ThreadsSetting = 0
    """torch CPU threads of the local backend (``RLLM_TRAIN_TORCH_THREADS``): a count (0:
    torch's default), or ``auto``, which times the micro-batches and keeps the faster of 1
    and all cores."""

    save_optimizer: bool = True
    """Keep the AdamW state in checkpoints (exact resume; ~2x the weights on disk)."""

    # --- distillation teacher served over HTTP -------------------------------------
    teacher_url: str | None = None
    """Base URL of a served teacher for loss=distill (vLLM, SGLang or ``rllm-cli serve``;
    a trailing ``/v1`` is dropped). It must use the student's tokenizer."""
    teacher_api: TeacherApi = TeacherApi.VLLM
    """vllm: /v1/completions with prompt_logprobs; sglang: /generate with return_logprob."""
    teacher_api_key: SecretStr | None = None
    """Bearer key sent to the teacher (never logged)."""
    teacher_served_model: str | None = None
    """Model name sent to a vLLM teacher (None: the first one /v1/models lists)."""
    teacher_timeout_s: float = Field(default=60.0, gt=0)
    """Timeout of one teacher request, in seconds."""
    teacher_concurrency: int = Field(default=8, ge=1)
    """Teacher requests in flight at once (one sequence per request)."""
    teacher_retries: int = Field(default=3, ge=0)
    """Retries of a request that failed with a 5xx/429 answer or a connection error."""

    # --- hosted backends ------------------------------------------------------------
    tinker_url: str = "https://tinker.thinkingmachines.dev/services/tinker-prod"
    """Tinker service URL."""
    tinker_api_key: SecretStr | None = None
    """Tinker API key."""
    fireworks_url: str = "https://api.fireworks.ai"
    """Fireworks API base URL."""
    fireworks_api_key: SecretStr | None = None
    """Fireworks API key."""
    fireworks_account: str = ""
    """Fireworks account id."""
    fireworks_deployment: str = ""
    """Deployment each new version's LoRA is loaded onto, as its default ("": none)."""
    tokenizer: str | None = None
    """Local directory or .gguf with the tokenizer of a hosted model (fireworks trains on
    text, so token IDs are decoded with it); default: the default local model's."""

    @field_validator("teacher_url")
    @classmethod
    def _check_teacher_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not value.startswith(("http://", "https://")):
            raise ConfigError(
                f"teacher URL {value!r} must start with http:// or https:// (RLLM_TEACHER_URL)"
            )
        value = value.rstrip("/")
        return value[:-3] if value.endswith("/v1") else value

    @model_validator(mode="after")
    def _check_teacher(self) -> TrainerSettings:
        pairs = (("teacher_model", self.teacher_model), ("teacher_url", self.teacher_url))
        given = [name for name, value in pairs if value]
        # With neither, a backend other than local refuses loss=distill by its capabilities.
        needs_one = self.backend is BackendName.LOCAL or len(given) > 1
        if self.loss is LossKind.DISTILL and len(given) != 1 and needs_one:
            got = " and ".join(given) if given else "neither"
            raise ConfigError(
                f"loss=distill needs exactly one of teacher_model (a local model directory, "
                f"--teacher-model / RLLM_TEACHER_MODEL) or teacher_url (a served teacher, "
                f"--teacher-url / RLLM_TEACHER_URL); got {got}"
            )
        if self.loss is not LossKind.DISTILL and given:
            raise ConfigError(
                f"{' and '.join(given)} is set but loss={self.loss.value}; a teacher is used "
                f"only by loss=distill (unset it or choose --loss distill)"
            )
        return self

    @model_validator(mode="after")
    def _check_estimator(self) -> TrainerSettings:
        allowed = LOSS_ESTIMATORS.get(self.loss, ())
        if self.estimator is not None and self.estimator not in allowed:
            fits = f"one of {', '.join(allowed)}" if allowed else "none (unset it)"
            raise ConfigError(
                f"estimator={self.estimator.value!r} does not fit loss={self.loss.value}: it takes "
                f"{fits} (RLLM_TRAIN_ESTIMATOR)"
            )
        return self

    def run_estimator(self) -> Estimator | None:
        """The estimator every episode of this run must carry; None when the loss uses no
        advantages (sft, distill)."""
        allowed = LOSS_ESTIMATORS.get(self.loss, ())
        if not allowed:
            return None
        return self.estimator or allowed[0]

    def effective_max_staleness(self) -> int:
        """0 in sync mode, ``max_staleness`` in async mode."""
        return 0 if self.mode is SyncMode.SYNC else self.max_staleness
