"""Device check of the ``local`` training backend and the local model server's engine, on
CUDA when torch sees a GPU (else on the CPU), with tiny random Llamas built offline.

Checks: engine generation (sampled and greedy) gives token IDs in range and finite
logprobs <= 0; greedy tokens on the GPU match the CPU's for the same float32 weights; the
engine's logprobs match the trainer's forward pass; GRPO updates give finite losses and
raise the advantage-weighted logprob of the batch; one update on the CPU and on the GPU
agree; bf16 training and serving run. Prints one line per step and a JSON line last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch

REPORT: dict[str, Any] = {"checks": {}, "figures": {}, "timings_s": {}, "errors": {}}
TEXTS = ["hello world", "what is 2+2?", "a", "the quick brown fox jumps over", "Q: why?\nA:"]


def guarded(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an exception marks check ``name`` as an error (its traceback's last
    lines kept) instead of ending the run, and None is returned."""
    try:
        return fn(*args)
    except Exception:  # a check script reports every failure, then goes on
        lines = traceback.format_exc().strip().splitlines()
        REPORT["checks"][name] = "error"
        REPORT["errors"][name] = lines[-6:]
        print(f"[{name}] ERROR\n" + "\n".join(lines[-12:]), flush=True)
        return None


def verdict(name: str, ok: bool | None, **figures: Any) -> None:
    """Record check ``name`` (None: a figure only, not judged) and its figures."""
    status = "info" if ok is None else "pass" if ok else "fail"
    REPORT["checks"][name] = status
    REPORT["figures"].update({f"{name}.{k}": v for k, v in figures.items()})
    print(f"[{name}] {status} {figures}", flush=True)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def model_dir(root: Path, hidden: int, layers: int) -> Path:
    """A tiny random Llama directory as the tests build it (``tiny_model_dir``)."""
    from rllm.models.tiny import tiny_model_dir

    return tiny_model_dir(root / f"llama-{hidden}x{layers}", hidden=hidden, layers=layers)


def engine(directory: Path, device: str, dtype: str = "float32") -> Any:
    """A serving engine on ``device``, as ``build_engine`` makes it."""
    from rllm.models.loading import load_model
    from rllm.serving.engine import Engine

    loaded = load_model(str(directory), None, device)
    if dtype != "float32":
        loaded.model.to(getattr(torch, dtype))
    return Engine(loaded)


def prompts(eng: Any, copies: int) -> list[list[int]]:
    return [list(eng.tokenizer.encode(t, add_special_tokens=False)) for t in TEXTS] * copies


def check_generation(name: str, eng: Any, rows: list[list[int]], params: Any) -> list[Any]:
    """Generate and check token IDs and logprobs; returns the completions."""
    out = eng.generate(rows, [params] * len(rows))
    vocab = eng.vocab_size
    ids = [t for c in out for t in c.token_ids]
    lps = [x for c in out for x in c.logprobs]
    finite = all(math.isfinite(x) for x in lps)
    ok = (
        len(out) == len(rows)
        and all(c.token_ids and len(c.token_ids) == len(c.logprobs) for c in out)
        and all(0 <= t < vocab for t in ids)
        and finite
        and max(lps) <= 1e-5
    )
    verdict(name, ok, tokens=len(ids), max_logprob=max(lps) if lps else None, finite=finite)
    return list(out)


def compare_greedy(name: str, a: Any, b: Any, rows: list[list[int]], judge: bool = True) -> None:
    """Greedy tokens of engines ``a`` and ``b``: equal, or the first mismatch reported
    (``judge`` False: reported only, as bf16 is expected to differ)."""
    from rllm.serving.sampling import SamplingParams

    greedy = [SamplingParams(temperature=0.0, max_tokens=32)] * len(rows)
    first: list[int | None] = []
    lp_diff = 0.0
    for x, y in zip(a.generate(rows, greedy), b.generate(rows, greedy), strict=True):
        n = next(
            (i for i, (s, t) in enumerate(zip(x.token_ids, y.token_ids, strict=False)) if s != t),
            None,
        )
        if n is None and len(x.token_ids) != len(y.token_ids):
            n = min(len(x.token_ids), len(y.token_ids))
        first.append(n)
        same = len(x.token_ids) if n is None else n
        diffs = [abs(p - q) for p, q in zip(x.logprobs[:same], y.logprobs[:same], strict=True)]
        lp_diff = max([lp_diff, *diffs])
    same_all = all(n is None for n in first)
    verdict(name, same_all if judge else None, first_mismatch=first, max_logprob_diff=lp_diff)


def grpo_batch(eng: Any, groups: int, size: int, max_tokens: int) -> Any:
    """A GRPO batch of ``groups`` prompts x ``size`` samples from ``eng``; the reward is the
    share of vowels in the response, the advantage the reward minus its group's mean."""
    from rllm.consumers.trainer.types import TrainBatch, TrainSequence
    from rllm.serving.sampling import SamplingParams

    rows = prompts(eng, groups)[:groups]
    rows = [p for p in rows for _ in range(size)]
    params = [
        SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=i) for i in range(len(rows))
    ]
    done = eng.generate(rows, params)
    vowels = {eng.tokenizer.convert_tokens_to_ids(c) for c in "aeiouAEIOU"}
    rewards = [sum(t in vowels for t in c.token_ids) / len(c.token_ids) for c in done]
    seqs = []
    for i, (p, c) in enumerate(zip(rows, done, strict=True)):
        g = i // size
        mean = sum(rewards[g * size : (g + 1) * size]) / size
        seqs.append(
            TrainSequence(
                episode_id=f"e{g}",
                session_id=f"e{g}/s{i % size}",
                step_ids=(f"e{g}/s{i % size}/0",),
                input_ids_T=[*p, *c.token_ids],
                loss_mask_T=[0] * len(p) + [1] * len(c.token_ids),
                logprobs_T=[0.0] * len(p) + list(c.logprobs),
                advantage=rewards[i] - mean,
            )
        )
    return TrainBatch(seqs, [f"e{g}" for g in range(groups)], rewards)


def backend(directory: Path, device: str, precision: str = "fp32") -> Any:
    from rllm.consumers.backends.local.backend import LocalBackend
    from rllm.consumers.trainer.settings import TrainerSettings

    settings = TrainerSettings(
        model=str(directory), device=device, precision=precision, lr=1e-3, micro_batch_size=8
    )
    return LocalBackend(settings)


def batch_logprobs(be: Any, batch: Any) -> list[list[float]]:
    """The trainer's logprob of each loss token of each sequence (no shared prefix)."""
    from rllm.consumers.backends.local.tensors import to_tensors
    from rllm.consumers.trainer.losses import token_logprobs

    pad = int(be.tokenizer.pad_token_id or 0)
    out = []
    with torch.no_grad():
        for s in batch.sequences:
            t = to_tensors([s], pad, be.settings.device)
            logits = be.compute(input_ids=t.input_ids_BT, attention_mask=t.attention_BT).logits
            lp = token_logprobs(logits, t.targets_BT)[0]
            out.append(
                [float(x) for x, m in zip(lp.tolist(), t.mask_BT[0].tolist(), strict=True) if m > 0]
            )
    return out


def objective(be: Any, batch: Any) -> float:
    """Mean over sequences of advantage x mean loss-token logprob (GRPO raises it)."""
    lps = batch_logprobs(be, batch)
    terms = [s.advantage * sum(lp) / len(lp) for s, lp in zip(batch.sequences, lps, strict=True)]
    return float(sum(terms) / len(terms))


def fresh(batch: Any) -> Any:
    from rllm.consumers.trainer.types import TrainBatch

    return TrainBatch(list(batch.sequences), list(batch.episode_ids), list(batch.rewards))


def check_training(directory: Path, device: str, batch: Any, precision: str) -> Any:
    """Three GRPO updates: finite losses, the policy moves, the objective rises."""
    be = backend(directory, device, precision)
    name = f"train_{precision}"
    if precision == "fp32":
        engine_lp = [s.logprobs_T[s.loss_mask_T.index(1) :] for s in batch.sequences]
        diff = max(
            abs(a - b)
            for e, t in zip(engine_lp, batch_logprobs(be, batch), strict=True)
            for a, b in zip(e, t, strict=True)
        )
        verdict("engine_vs_trainer_logprobs", diff < 1e-3, max_abs_diff=diff)
    before = objective(be, batch)
    start = {k: v.detach().clone() for k, v in be.state_dict().items()}
    results = [be.update(fresh(batch)).metrics for _ in range(3)]
    moved = max(float((v - start[k]).abs().max()) for k, v in be.state_dict().items())
    after = objective(be, batch)
    finite = all(math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]) for m in results)
    verdict(
        name,
        finite and moved > 0 and after > before,
        losses=[m["loss"] for m in results],
        grad_norms=[m["grad_norm"] for m in results],
        ratio_mean_first=results[0].get("ratio_mean"),
        objective_before=before,
        objective_after=after,
        max_weight_change=moved,
    )
    return results[0]


def one_update(directory: Path, device: str, batch: Any) -> tuple[dict[str, float], dict[str, Any]]:
    """Metrics of one fp32 update from the saved weights, and each weight's change."""
    be = backend(directory, device)
    start = {k: v.detach().cpu().clone() for k, v in be.state_dict().items()}
    metrics = be.update(fresh(batch)).metrics
    return metrics, {k: v.detach().cpu() - start[k] for k, v in be.state_dict().items()}


def compare_update(directory: Path, batch: Any, reference: str, device: str) -> None:
    """One update on ``reference`` (the CPU) and on ``device`` from identical weights and
    batch."""
    cpu_m, cpu_d = one_update(directory, reference, batch)
    gpu_m, gpu_d = one_update(directory, device, batch)

    def rel(a: float, b: float) -> float:
        return abs(a - b) / max(abs(a), abs(b), 1e-12)

    num = math.sqrt(sum(float(((gpu_d[k] - d) ** 2).sum()) for k, d in cpu_d.items()))
    den = math.sqrt(sum(float((d**2).sum()) for d in cpu_d.values()))
    loss_rel = rel(cpu_m["loss"], gpu_m["loss"])
    grad_rel = rel(cpu_m["grad_norm"], gpu_m["grad_norm"])
    verdict(
        f"update_{reference}_vs_{device}",
        loss_rel < 1e-3 and grad_rel < 1e-3,
        loss_reference=cpu_m["loss"],
        loss_device=gpu_m["loss"],
        loss_rel_diff=loss_rel,
        grad_norm_rel_diff=grad_rel,
        weight_update_rel_diff=num / max(den, 1e-30),
    )


def timed(device: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` and its seconds, the device's queue drained before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn(*args)
    sync(device)
    return out, time.perf_counter() - t0


def timings(root: Path, device: str, hidden: int, layers: int) -> None:
    """Seconds of a 32-row generation and of a 32-sequence update (fp32 and bf16), after a
    warm-up of each, on a larger random model."""
    from rllm.serving.sampling import SamplingParams

    size = f"{hidden}x{layers}"
    directory = model_dir(root, hidden, layers)
    eng = engine(directory, device)
    rows = prompts(eng, 7)[:32]
    params = [SamplingParams(temperature=1.0, max_tokens=64, seed=i) for i in range(32)]
    eng.generate(rows[:4], params[:4])
    done, secs = timed(device, eng.generate, rows, params)
    tokens = sum(len(c.token_ids) for c in done)
    out = {
        "params_m": sum(p.numel() for p in eng.model.parameters()) / 1e6,
        "generate_32x64_s": secs,
        "generate_tokens_per_s": tokens / secs,
    }
    batch = grpo_batch(eng, 8, 4, 64)
    out["update_tokens"] = batch.num_tokens
    for precision in ("fp32", "bf16"):
        be = backend(directory, device, precision)
        be.update(fresh(batch))
        out[f"update_32seq_{precision}_s"] = timed(device, be.update, fresh(batch))[1]
    REPORT["timings_s"][f"llama_{size}"] = out
    print(f"[timings {size}] {out}", flush=True)


def serving_checks(tiny: Path, eng: Any, device: str, ref: str | None) -> None:
    """Sampled, greedy and bf16 generation on ``device``; greedy against ``ref``'s."""
    from rllm.serving.sampling import SamplingParams

    rows = prompts(eng, 4)
    sampled = SamplingParams(temperature=1.0, max_tokens=32)
    greedy = SamplingParams(temperature=0.0, max_tokens=32)
    guarded("generate_sampled", check_generation, "generate_sampled", eng, rows, sampled)
    guarded("generate_greedy", check_generation, "generate_greedy", eng, rows, greedy)
    if ref is not None:
        other = guarded(f"engine_{ref}", engine, tiny, ref)
        name = f"greedy_{ref}_vs_{device}"
        if other is not None:
            guarded(name, compare_greedy, name, other, eng, prompts(eng, 1))
    half = guarded("engine_bf16", engine, tiny, device, "bfloat16")
    if half is not None:
        guarded("generate_bf16", check_generation, "generate_bf16", half, rows, sampled)
        name = "greedy_fp32_vs_bf16"
        guarded(name, compare_greedy, name, eng, half, prompts(eng, 1), False)


def training_checks(tiny: Path, batch: Any, device: str, ref: str | None) -> None:
    """GRPO updates in fp32 and bf16 on ``device``; one update against ``ref``'s."""
    fp32 = guarded("train_fp32", check_training, tiny, device, batch, "fp32")
    bf16 = guarded("train_bf16", check_training, tiny, device, batch, "bf16")
    if fp32 and bf16:
        rel = abs(bf16["loss"] - fp32["loss"]) / max(abs(fp32["loss"]), 1e-12)
        REPORT["figures"]["bf16_vs_fp32.first_loss_rel_diff"] = rel
    if ref is not None:
        name = f"update_{ref}_vs_{device}"
        guarded(name, compare_update, tiny, batch, ref, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reference", default="cpu", help="device compared against")
    parser.add_argument(
        "--compare", action="store_true", help="compare even when --device is --reference"
    )
    args = parser.parse_args()
    device: str = args.device
    ref: str = args.reference
    compare = args.compare or device != ref
    started = time.perf_counter()
    import transformers

    REPORT.update(
        device=device,
        device_name=torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        transformers=transformers.__version__,
        python=platform.python_version(),
        float32_matmul_precision=torch.get_float32_matmul_precision(),
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tiny = guarded("build_tiny_model", model_dir, root, 32, 2)
        eng = guarded("engine", engine, tiny, device) if tiny else None
        if tiny is not None and eng is not None:
            serving_checks(tiny, eng, device, ref if compare else None)
            batch = guarded("grpo_batch", grpo_batch, eng, 4, 4, 24)
            if batch is not None:
                training_checks(tiny, batch, device, ref if compare else None)
        sizes = [(512, 8), (1024, 16)] if device == "cuda" else [(128, 2)]
        for hidden, layers in sizes:
            guarded(f"timings_{hidden}x{layers}", timings, root, device, hidden, layers)
    REPORT["timings_s"]["total"] = time.perf_counter() - started
    if device == "cuda":
        REPORT["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
    REPORT["ok"] = all(v in ("pass", "info") for v in REPORT["checks"].values())
    print(json.dumps(REPORT, default=str))


if __name__ == "__main__":
    main()
