"""The generation engine of the local model server: batched sampling with a KV cache that
returns the sampled token IDs and their logprobs, and swaps weights for a new policy.

Logprobs of sampled tokens are those of the distribution they were sampled from (logits
over the temperature, cut by top-k and top-p, renormalised: vLLM's processed logprobs,
``rllm.models.sampling``), which the trainer recomputes with the step's sampling
parameters. The engine also scores given token sequences with the raw distribution
(vLLM's ``prompt_logprobs``), e.g. as a distillation teacher.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rllm.models.loading import (
    LoadedModel,
    check_weights,
    checkpoint_path,
    read_weights,
    stop_token_ids,
)
from rllm.models.threads import FixedThreads, ThreadTuner, compute
from rllm.serving.sampling import SamplingParams, row_logprobs, sample_one, sample_rows

__all__ = ["Completion", "Engine", "PromptLogprobs", "SamplingParams"]

LOGPROB_FLOOR = -9999.0
"""Logprob reported for a token outside the sampling cut (JSON has no -inf; vLLM's value)."""

PromptLogprobs = list[dict[int, tuple[float, int]] | None]
"""Per prompt position: ``{token_id: (logprob, rank)}`` for the prompt's own token and the
top-k tokens, given the tokens before it; ``None`` at position 0 (nothing predicts it)."""


@dataclass
class Completion:
    """One sampled continuation."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    stop_reason: str | int | None = None
    policy_version: int = 0
    """Version of the weights that generated it."""


def _score_rows(
    logp_TV: torch.Tensor, targets: list[int], top_k: int
) -> list[dict[int, tuple[float, int]] | None]:
    """``{token: (logprob, rank)}`` of each target (and the top-k) under ``logp_TV``."""
    targets_T = torch.tensor(targets, device=logp_TV.device)
    chosen_T = logp_TV.gather(-1, targets_T.unsqueeze(-1)).squeeze(-1)
    rank_T = (logp_TV > chosen_T.unsqueeze(-1)).sum(-1) + 1
    tops: list[list[tuple[int, float]]] = [[] for _ in targets]
    if top_k:
        vals_TK, idx_TK = torch.topk(logp_TV, top_k)
        tops = [
            list(zip(i, v, strict=True))
            for i, v in zip(idx_TK.tolist(), vals_TK.tolist(), strict=True)
        ]
    rows: list[dict[int, tuple[float, int]] | None] = []
    for tok, lp, rank, top in zip(targets, chosen_T.tolist(), rank_T.tolist(), tops, strict=True):
        row = {tok: (float(lp), int(rank))}
        for r, (j, v) in enumerate(top, 1):
            row.setdefault(int(j), (float(v), r))
        rows.append(row)
    return rows


class Engine:
    """Generates for many requests at once on one model; thread-safe."""

    def __init__(
        self,
        loaded: LoadedModel,
        version: int = 0,
        max_model_len: int | None = None,
        threads: ThreadTuner | FixedThreads | None = None,
    ) -> None:
        self.model: Any = loaded.model.eval()
        self.tokenizer: Any = loaded.tokenizer
        self.source = loaded.source
        self.version = version
        self.policy_run = ""
        """Training run whose ``version`` is loaded ("": the weights it started with)."""
        self.lock = threading.Lock()
        self.stop_ids = stop_token_ids(self.tokenizer, self.model)
        self.max_model_len = max_model_len or int(
            getattr(self.model.config, "max_position_embeddings", 2048)
        )
        self.device = next(self.model.parameters()).device
        self._rng = torch.Generator().manual_seed(0)
        self.last_reload_s = 0.0
        self._base: dict[str, torch.Tensor] | None = None
        """The starting weights, kept when ``source`` cannot give them again (a GGUF)."""
        self.threads = threads or FixedThreads()
        """Times the decode steps to choose torch's thread count (fixed: left as set)."""

    # --- weights ---------------------------------------------------------------------
    @compute
    def load_state_dict(
        self, state: dict[str, torch.Tensor], version: int, run_id: str = ""
    ) -> None:
        """Copy new weights in (between batches) and report ``version`` of ``run_id``.

        Raises:
            ValueError: ``state`` is not a full set of this model's weights (names missing,
                unknown or of other shapes); nothing is copied and the served policy stays.
        """
        with self.lock, torch.no_grad():
            check_weights(self.model, state, f"policy {run_id or '(base)'} version {version}")
            self.model.load_state_dict(state, strict=False)  # tied aliases may be absent
            self.version, self.policy_run = version, run_id

    @compute
    def load_base(self) -> float:
        """Serve the weights the engine started with again, as version 0 of no run; return
        seconds taken (nothing to do when it serves them already).

        Raises:
            FileNotFoundError: they were never kept and ``source`` holds no safetensors.
        """
        started = time.perf_counter()
        if self.policy_run or self.version:
            state = (
                self._base
                if self._base is not None
                else read_weights(Path(self.source), str(self.device))
            )
            self.load_state_dict(state, 0, "")
        self.last_reload_s = time.perf_counter() - started
        return self.last_reload_s

    def _keep_base(self) -> None:
        """Copy the starting weights aside before they are first replaced, unless they can
        be read again from ``source`` (an HF directory with safetensors)."""
        if self._base is not None or self.policy_run or self.version:
            return
        if Path(self.source).is_dir() and any(Path(self.source).glob("*.safetensors")):
            return
        with self.lock, torch.no_grad():
            self._base = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    @compute
    def load_checkpoint(self, uri: str, version: int, run_id: str = "") -> float:
        """Load safetensors weights from a checkpoint directory; return seconds taken.

        Raises:
            FileNotFoundError: the directory holds no ``*.safetensors`` weights.
            ValueError: ``uri`` is not local, or its weights are not this model's.
        """
        started = time.perf_counter()
        state = read_weights(checkpoint_path(uri), str(self.device))
        self._keep_base()
        self.load_state_dict(state, version, run_id)
        self.last_reload_s = time.perf_counter() - started
        return self.last_reload_s

    @property
    def vocab_size(self) -> int:
        """Rows of the model's input embeddings: valid token IDs are below it."""
        return int(self.model.get_input_embeddings().num_embeddings)

    # --- scoring ---------------------------------------------------------------------
    @compute
    def prompt_logprobs(
        self, prompts: list[list[int]], top_k: int = 0, sample: SamplingParams | None = None
    ) -> tuple[list[PromptLogprobs], list[list[Completion]]]:
        """Score token sequences: the logprob and rank (1 = most likely) of every token
        given the tokens before it, plus the ``top_k`` most likely tokens at each position,
        all prompts in one right-padded forward pass. With ``sample`` (``max_tokens`` 1),
        also its ``n`` one-token completions per prompt from the same pass (else none)."""
        if not prompts:
            return [], []
        with self.lock, torch.inference_mode():
            scored, samples = self._prompt_logprobs(prompts, top_k, sample)
            for row in samples:
                for r in row:
                    r.policy_version = self.version
            return scored, samples

    def _prompt_logprobs(
        self, prompts: list[list[int]], top_k: int, sample: SamplingParams | None
    ) -> tuple[list[PromptLogprobs], list[list[Completion]]]:
        b, width = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((b, width), int(self.tokenizer.pad_token_id or 0), dtype=torch.long)
        attn = torch.zeros((b, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, : len(p)] = torch.tensor(p)
            attn[i, : len(p)] = 1
        logits_BTV = self.model(
            input_ids=ids.to(self.device), attention_mask=attn.to(self.device), use_cache=False
        ).logits
        results: list[PromptLogprobs] = []
        samples: list[list[Completion]] = []
        for i, p in enumerate(prompts):
            rows: PromptLogprobs = [None]
            if len(p) > 1:
                logp_TV = torch.log_softmax(logits_BTV[i, : len(p) - 1].float(), -1)
                rows += _score_rows(logp_TV, p[1:], top_k)
            results.append(rows)
            if sample is not None:
                logp_V = torch.log_softmax(logits_BTV[i, len(p) - 1].float(), -1).cpu()
                samples.append(self._one_token(logp_V, sample))
        return results, samples

    def _one_token(self, logp_V: torch.Tensor, p: SamplingParams) -> list[Completion]:
        """``p.n`` one-token completions from one next-token distribution (seeds as the
        batcher gives them: ``seed + k``)."""
        out = []
        for k in range(p.n):
            gen = self._rng if p.seed is None else torch.Generator().manual_seed(p.seed + k)
            c = Completion()
            sampled_V = row_logprobs(logp_V.unsqueeze(0), [p])[0]
            tok = sample_one(sampled_V, p, gen)
            self._record(c, sampled_V, tok, p)
            self._finished(c, tok, p, 1)
            if not isinstance(c.stop_reason, str):
                c.text = self.tokenizer.decode(c.token_ids, skip_special_tokens=True)
            out.append(c)
        return out

    # --- generation ------------------------------------------------------------------
    @compute
    def generate(
        self,
        prompts: list[list[int]],
        params: list[SamplingParams],
        stop: Sequence[threading.Event] | None = None,
    ) -> list[Completion]:
        """One completion per (prompt, params) row, generated as one batch; a row whose
        ``stop`` event is set (its client went away) stops at the next token."""
        if not prompts:
            return []
        with self.lock, torch.inference_mode():
            results = self._generate(prompts, params, stop)
            for r in results:
                r.policy_version = self.version
            return results

    def _prefill(
        self, prompts: list[list[int]], pad: int
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run each distinct prompt once (a group's samples share theirs) and give every
        row its cache: ``(cache, next-token logits_BV, attention_BT, positions_BT)``."""
        distinct: dict[tuple[int, ...], int] = {}
        row_of = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        width = max(len(p) for p in distinct)
        ids = torch.full((len(distinct), width), pad, dtype=torch.long)
        attn = torch.zeros((len(distinct), width), dtype=torch.long)
        for i, p in enumerate(distinct):
            ids[i, width - len(p) :] = torch.tensor(p)
            attn[i, width - len(p) :] = 1
        ids, attn = ids.to(self.device), attn.to(self.device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        self.threads.hold()
        out = self.model(
            input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1
        )
        past, logits = out.past_key_values, out.logits[:, -1, :].float()
        if len(distinct) < len(prompts):
            rows = torch.tensor(row_of, device=self.device)
            past.batch_select_indices(rows)
            logits, attn, pos = logits[rows], attn[rows], pos[rows]
        return past, logits, attn, pos

    def _generate(
        self,
        prompts: list[list[int]],
        params: list[SamplingParams],
        stop: Sequence[threading.Event] | None,
    ) -> list[Completion]:
        b = len(prompts)
        pad = int(self.tokenizer.pad_token_id or 0)
        past, logits, attn, pos = self._prefill(prompts, pad)
        gens = [
            torch.Generator().manual_seed(p.seed) if p.seed is not None else self._rng
            for p in params
        ]
        results = [Completion() for _ in range(b)]
        done = [False] * b
        budget = [
            min(p.max_tokens, self.max_model_len - len(q))
            for p, q in zip(params, prompts, strict=True)
        ]
        for i in range(b):
            if budget[i] <= 0:
                done[i] = True
        last_pos = pos[:, -1]
        rows = list(range(b))  # the request of each row of the cache
        while True:
            if stop is not None:
                for i in rows:
                    done[i] = done[i] or stop[i].is_set()
            live = [k for k, i in enumerate(rows) if not done[i]]
            if not live:
                break
            if (len(rows) - len(live)) * 4 >= len(rows):  # a quarter finished: drop them
                keep = torch.tensor(live, device=self.device)
                past.batch_select_indices(keep)
                logits, attn, last_pos = logits[keep], attn[keep], last_pos[keep]
                rows, live = [rows[k] for k in live], list(range(len(live)))
            row_params = [params[i] for i in rows]
            logp_BV = row_logprobs(torch.log_softmax(logits, -1).cpu(), row_params)
            chosen = [pad] * len(rows)
            picks = sample_rows(logp_BV, live, row_params, [gens[i] for i in rows], self._rng)
            for k, tok in picks.items():
                i = rows[k]
                chosen[k] = tok
                self._record(results[i], logp_BV[k], tok, params[i])
                done[i] = self._finished(results[i], tok, params[i], budget[i])
            if all(done):
                break
            ones = torch.ones((len(rows), 1), dtype=torch.long, device=self.device)
            attn = torch.cat([attn, ones], 1)
            last_pos = last_pos + 1
            step_ids = torch.tensor(chosen, device=self.device).unsqueeze(1)
            with self.threads.step(len(rows)):
                out = self.model(
                    input_ids=step_ids,
                    attention_mask=attn,
                    position_ids=last_pos.unsqueeze(1),
                    past_key_values=past,
                    use_cache=True,
                )
            past, logits = out.past_key_values, out.logits[:, -1, :].float()
        for r in results:
            if not isinstance(r.stop_reason, str):  # a stop string already cut the text
                r.text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
        return results

    def threads_report(self) -> dict[str, float]:
        """The thread count generation uses (and, when tuned, how the others compared);
        answered without the compute thread, which may be busy generating."""
        return self.threads.summary()

    def _record(self, r: Completion, logp_V: torch.Tensor, tok: int, p: SamplingParams) -> None:
        """Keep ``tok`` and its logprob under ``logp_V``, the distribution it was sampled
        from; a token cut by top-k / top-p is listed at ``LOGPROB_FLOOR`` (vLLM's -9999)."""
        r.token_ids.append(tok)
        r.logprobs.append(max(float(logp_V[tok]), LOGPROB_FLOOR))
        if p.top_logprobs > 0:
            vals, idx = torch.topk(logp_V, p.top_logprobs)
            r.top_logprobs.append(
                [(int(j), max(float(v), LOGPROB_FLOOR)) for j, v in zip(idx, vals, strict=True)]
            )
        else:
            r.top_logprobs.append([])

    def _finished(self, r: Completion, tok: int, p: SamplingParams, budget: int) -> bool:
        if tok in self.stop_ids:
            r.finish_reason, r.stop_reason = "stop", None
            r.text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
            return True
        if p.stop:
            text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
            hits = [(text.find(s), s) for s in p.stop if s and s in text]
            if hits:
                at, s = min(hits)
                r.text, r.finish_reason, r.stop_reason = text[:at], "stop", s
                return True
        if len(r.token_ids) >= budget:
            r.finish_reason = "length"
            return True
        return False
