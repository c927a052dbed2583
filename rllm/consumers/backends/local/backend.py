"""The ``local`` backend: torch + transformers on one machine, full fine-tuning with AdamW.

For loss=distill the teacher is a local model directory (``teacher_model``) or a served
model (``teacher_url``, through ``rllm.consumers.trainer.teacher``).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import torch

from rllm.consumers.backends.base import BackendBase
from rllm.consumers.backends.local.tensors import (
    SequenceTensors,
    group_by_prefix,
    shared_prefix,
    to_tensors,
)
from rllm.consumers.trainer.errors import CheckpointError
from rllm.consumers.trainer.losses import LossInputs, compute_loss, token_logprobs
from rllm.consumers.trainer.settings import Precision, TrainerSettings
from rllm.consumers.trainer.teacher import TeacherClient
from rllm.consumers.trainer.teacher import fill_teacher_logprobs as fill_from_client
from rllm.consumers.trainer.types import (
    Capabilities,
    LossAgg,
    LossKind,
    TrainBatch,
    TrainSequence,
    UpdateResult,
)
from rllm.models.loading import LoadedModel, load_model, read_weights
from rllm.models.precision import warn_if_slow_bf16
from rllm.models.runtime import start_runtime
from rllm.models.sampling import REPRODUCIBLE
from rllm.models.threads import compute

__all__ = ["LOCAL_CAPABILITIES", "LocalBackend"]

LOCAL_CAPABILITIES = Capabilities(
    losses=frozenset(LossKind),
    loss_aggs=frozenset(LossAgg),
    kl=True,
    clipping=True,
    lora=False,
    full_finetune=True,
    precisions=frozenset(Precision),
    sampling=frozenset(REPRODUCIBLE),
)


class LocalBackend(BackendBase):
    """Trains a local HF causal LM; checkpoints are HF directories (safetensors)."""

    name = "local"
    capabilities = LOCAL_CAPABILITIES

    @compute
    def __init__(self, settings: TrainerSettings, loaded: LoadedModel | None = None) -> None:
        super().__init__(settings)
        torch.manual_seed(settings.seed)
        runtime = start_runtime(
            settings.model,
            settings.gguf_file,
            settings.device,
            settings.torch_threads,
            loaded=loaded,
        )
        self.threads = runtime.threads
        """Times the micro-batches to choose torch's thread count (fixed: left as set)."""
        self.loaded = runtime.loaded
        self.model: Any = self.loaded.model
        self.tokenizer: Any = self.loaded.tokenizer
        self.model.train()
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay
        )
        self.compute: Any = self.model
        """The weights forward and backward run on: ``model`` itself, or its bf16 copy."""
        if settings.precision is Precision.BF16:
            warn_if_slow_bf16(settings.device, "the local training backend")
            self.compute = copy.deepcopy(self.model).to(torch.bfloat16)
        if next(self.compute.parameters()).device.type == "cpu":
            # torch's fused CPU attention is slow to differentiate at these lengths: eager
            # attention took 3.4 s where SDPA took 4.9 s of backward for 32 x ~50 tokens
            self.compute.set_attn_implementation("eager")
        self.reference: Any = None
        if settings.kl_coef > 0:
            self.reference = copy.deepcopy(self.compute).eval().requires_grad_(False)
        self.teacher: Any = None
        self.teacher_client: TeacherClient | None = None
        if settings.loss is LossKind.DISTILL and settings.teacher_model:
            self.teacher = load_model(settings.teacher_model, None, settings.device).model.eval()
        elif settings.loss is LossKind.DISTILL and settings.teacher_url:
            self.teacher_client = TeacherClient.from_settings(settings, self._encode)

    @property
    def base_model(self) -> str:
        """Where the initial weights came from."""
        return self.loaded.source

    def _logprobs(self, model: Any, t: SequenceTensors, sampled: bool = True) -> torch.Tensor:
        """Logprob of each target under the distribution its row was sampled from
        (``sampled``; else the raw one, as a teacher scores); a shared prefix runs once and
        its attention cache is repeated for every row (gradients flow back through it)."""
        if t.prefix_ids_1P is None:
            out = model(input_ids=t.input_ids_BT, attention_mask=t.attention_BT)
            return self._score(out.logits, t, sampled)
        rows, width = t.input_ids_BT.shape[0], t.prefix_ids_1P.shape[1]
        cache = model(input_ids=t.prefix_ids_1P, use_cache=True, logits_to_keep=1)
        past = cache.past_key_values
        past.batch_repeat_interleave(rows)
        ones = torch.ones((rows, width), dtype=t.attention_BT.dtype, device=t.attention_BT.device)
        out = model(
            input_ids=t.input_ids_BT,
            attention_mask=torch.cat([ones, t.attention_BT], 1),
            past_key_values=past,
            use_cache=True,
        )
        return self._score(out.logits, t, sampled)

    @staticmethod
    def _score(logits_BTV: torch.Tensor, t: SequenceTensors, sampled: bool) -> torch.Tensor:
        if not sampled:
            return token_logprobs(logits_BTV, t.targets_BT)
        return token_logprobs(logits_BTV, t.targets_BT, t.temperature_B, t.top_p_B, t.top_k_B)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def fill_teacher_logprobs(self, seqs: list[TrainSequence]) -> None:
        """Score every sequence with the teacher (distillation): the served one when
        ``teacher_url`` is set (from the calling thread: the teacher may be served by this
        process's compute thread), else the local teacher model."""
        if self.teacher_client is not None:
            fill_from_client(self.teacher_client, seqs)
        elif self.teacher is not None:
            self._fill_from_local_teacher(seqs)

    @compute
    def _fill_from_local_teacher(self, seqs: list[TrainSequence]) -> None:
        pad = int(self.tokenizer.pad_token_id or 0)
        with torch.no_grad():
            for s in seqs:
                t = to_tensors([s], pad, self.settings.device)
                lp = self._logprobs(self.teacher, t, sampled=False)[0].tolist()
                s.teacher_logprobs_T = [0.0, *lp]

    def update(self, batch: TrainBatch) -> UpdateResult:
        """One AdamW step over the batch, accumulated over micro-batches."""
        started = time.perf_counter()
        seqs = [q for q in batch.sequences if q.num_loss_tokens > 0]
        if not seqs:
            raise ValueError("batch has no token that carries loss")
        teacher_s = None
        if self.settings.loss is LossKind.DISTILL:
            self.fill_teacher_logprobs(seqs)
            teacher_s = time.perf_counter() - started
        return self._step(seqs, started, teacher_s)

    @compute
    def _step(
        self, seqs: list[TrainSequence], started: float, teacher_s: float | None
    ) -> UpdateResult:
        s = self.settings
        pad = int(self.tokenizer.pad_token_id or 0)
        total_tokens = sum(q.num_loss_tokens for q in seqs)
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        self.threads.hold()
        for chunk in group_by_prefix(seqs, s.micro_batch_size):
            t = to_tensors(chunk, pad, s.device, shared_prefix(chunk))
            with self.threads.step(t.input_ids_BT.numel()):  # the shared prefix is a small part
                self._micro_batch(chunk, t, len(seqs), total_tokens, sums)
        self.threads.hold()
        self._grads_to_master()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.max_grad_norm)
        self.optimizer.step()
        self._master_to_compute()
        self._version += 1
        sums.update(
            grad_norm=float(grad_norm),
            train_s=time.perf_counter() - started,
            **({"teacher_s": teacher_s} if teacher_s is not None else {}),
            num_sequences=float(len(seqs)),
            num_tokens=float(total_tokens),
            **self.threads.summary(),
        )
        return UpdateResult(version=self._version, metrics=sums)

    def _micro_batch(
        self,
        chunk: list[TrainSequence],
        t: SequenceTensors,
        num_seqs: int,
        total_tokens: int,
        sums: dict[str, float],
    ) -> None:
        """Forward and backward of one micro-batch: its gradients accumulate, weighted by
        its share of the batch, and its metrics into ``sums``."""
        s = self.settings
        ref = None
        if self.reference is not None:
            with torch.no_grad():
                ref = self._logprobs(self.reference, t)
        lp = self._logprobs(self.compute, t)
        out = compute_loss(
            s.loss,
            LossInputs(
                logprobs_BT=lp,
                old_logprobs_BT=t.old_logprobs_BT,
                advantages_BT=t.advantages_BT,
                mask_BT=t.mask_BT,
                ref_logprobs_BT=ref,
                teacher_logprobs_BT=t.teacher_logprobs_BT,
            ),
            s.loss_agg,
            s.clip_eps_low,
            s.clip_eps_high,
            s.kl_coef,
            s.clip_ratio_c,
        )
        if s.loss_agg is LossAgg.TOKEN_MEAN:
            weight = sum(q.num_loss_tokens for q in chunk) / total_tokens
        else:
            weight = len(chunk) / num_seqs
        scaled: Any = out.loss * weight
        scaled.backward()
        for k, v in out.metrics.items():
            sums[k] = sums.get(k, 0.0) + v * weight

    def _grads_to_master(self) -> None:
        """Move the bf16 copy's gradients onto the float32 weights AdamW updates."""
        if self.compute is self.model:
            return
        pairs = zip(self.model.parameters(), self.compute.parameters(), strict=True)
        for master, low in pairs:
            master.grad = None if low.grad is None else low.grad.float()
            low.grad = None

    def _master_to_compute(self) -> None:
        """Copy the float32 weights into the bf16 copy (after a step or a load)."""
        if self.compute is self.model:
            return
        with torch.no_grad():
            for master, low in zip(self.model.parameters(), self.compute.parameters(), strict=True):
                low.copy_(master)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The model's current weights (shared tensors, for an in-process server)."""
        return dict(self.model.state_dict())

    @compute
    def save(self, directory: Path) -> str:
        """Weights (and AdamW state) as an HF directory; returns its ``file://`` URI."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.model.save_pretrained(directory)
            self.tokenizer.save_pretrained(directory)
            if self.settings.save_optimizer:
                torch.save(self.optimizer.state_dict(), directory / "optimizer.pt")
        except OSError as exc:
            raise CheckpointError(f"cannot write checkpoint to {directory}: {exc}") from exc
        return directory.resolve().as_uri()

    @compute
    def load(self, directory: Path, version: int) -> None:
        """Restore weights (and AdamW state when saved) from ``directory``."""
        try:
            state = read_weights(directory, self.settings.device)
        except FileNotFoundError as exc:
            raise CheckpointError(str(exc)) from exc
        missing, _ = self.model.load_state_dict(state, strict=False)
        if [m for m in missing if "lm_head" not in m]:
            raise CheckpointError(f"checkpoint {directory} lacks weights: {missing[:5]}")
        opt = directory / "optimizer.pt"
        if opt.is_file():
            self.optimizer.load_state_dict(torch.load(opt, weights_only=True))
        self._master_to_compute()
        self._version = version

    def close(self) -> None:
        """Nothing held outside this process."""
