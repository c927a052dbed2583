"""GRPO on single-digit multiplication with SmolLM2-135M: reward per policy version,
tokens/s and seconds per update (generation, training, checkpoint, weight reload).

Three modes, on the same tasks (the ``multiply`` benchmark, in its fixed order):

- in-process (default): the local model server's engine and the trainer core in one
  process, weights handed over through checkpoints exactly as the server reloads them.
- ``--pipeline``: the whole loop: ``rllm-cli up``'s stack (Kafka, model server, gateway,
  processors; started here when not running) and ``AgentTrainer``: rollouts through the
  gateway, episodes from the processors, the trainer consumer, the server's reload.
- ``--compare``: both, one after the other in this run, and their ratio of seconds per
  update (the issue's target: the pipeline at most 1.3x the in-process loop).

    python perf/train.py --minutes 10 --plot /tmp/train.png
    python perf/train.py --pipeline --minutes 10
    python perf/train.py --compare --minutes 6

The last line is JSON: model, task, reward_first, reward_last, minutes, minutes_to_0_8,
updates, seconds_per_update, tokens_per_s (with --compare, the pipeline's figures plus
``in_process``, ``ratio_seconds_per_update`` and ``ratio_seconds_per_update_matched``, the
ratio over the first ``matched_updates`` updates of both loops).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import torch

from rllm.benchmarks.loaders import load_tasks
from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.backends.local.model import load_model
from rllm.consumers.trainer.loop import TrainerCore
from rllm.consumers.trainer.settings import SyncMode, TrainerSettings
from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.serving.engine import Engine, SamplingParams
from rllm.threads import Threads, apply_threads, check_threads, on_compute_thread

NUM = re.compile(r"-?\d+")


def reward(answer: str, a: int, b: int) -> float:
    """1.0 when the last number in the answer is a*b."""
    nums = NUM.findall(answer)
    return 1.0 if nums and int(nums[-1]) == a * b else 0.0


def grpo_advantages(rewards_G: list[float], eps: float = 1e-6) -> list[float]:
    """(r - mean) / (std + eps) within the group."""
    mean = sum(rewards_G) / len(rewards_G)
    std = (sum((r - mean) ** 2 for r in rewards_G) / len(rewards_G)) ** 0.5
    return [(r - mean) / (std + eps) for r in rewards_G]


def episode(
    run_id: str, a: int, b: int, prompt: list[int], outs: list[Any], texts: list[str], version: int
) -> t.EpisodeAssembled:
    """An EpisodeAssembled as the processors would publish it."""
    task = t.Task(
        task_id=f"mul/{a}x{b}",
        instruction=f"What is {a} times {b}?",
        ground_truth_json=json.dumps(str(a * b)),
    )
    rewards = [reward(x, a, b) for x in texts]
    trajs = []
    for i, o in enumerate(outs):
        sid = f"{run_id}/{task.task_id}/{uuid.uuid4().hex[:6]}/{i}"
        step = t.StepCaptured(
            step_id=f"{sid}/0",
            step_index=0,
            api=t.ApiKind.CHAT,
            model="smollm2-135m",
            prompt_token_ids=pack_tokens(prompt),
            response_token_ids=pack_tokens(o.token_ids),
            response_logprobs=pack_logprobs(o.logprobs),
            finish_reason=o.finish_reason,
            policy_version=version,
        )
        trajs.append(
            t.TrajectoryAssembled(
                event_id=f"traj:{sid}",
                session_id=sid,
                run_id=run_id,
                task=task,
                rollout_index=i,
                group_size=len(outs),
                steps=(step,),
                status=t.SessionStatus.OK,
                reward=rewards[i],
            )
        )
    return t.EpisodeAssembled(
        event_id=f"{run_id}/{task.task_id}/v{version}",
        run_id=run_id,
        task=task,
        trajectories=tuple(trajs),
        rewards=tuple(rewards),
        advantages=tuple(grpo_advantages(rewards)),
        group_size=len(outs),
        uniform_reward=len(set(rewards)) == 1,
    )


@contextlib.contextmanager
def checkpoint_dir(args: argparse.Namespace) -> Iterator[Path]:
    """``--checkpoint-dir``, else a temporary directory removed afterwards (a run writes
    0.5-1 GB of checkpoints)."""
    if args.checkpoint_dir:
        yield Path(args.checkpoint_dir)
        return
    with tempfile.TemporaryDirectory(prefix="rllm-perf-") as tmp:
        yield Path(tmp)


def run_in_process(args: argparse.Namespace) -> dict[str, Any]:
    with checkpoint_dir(args) as ckpt:
        return _in_process(args, ckpt)


def _in_process(args: argparse.Namespace, ckpt: Path) -> dict[str, Any]:
    settings = TrainerSettings(
        model=args.model,
        lr=args.lr,
        batch_size=args.prompts,
        micro_batch_size=args.micro_batch,
        checkpoint_dir=ckpt,
        run_id=f"perf-{uuid.uuid4().hex[:6]}",
        mode=SyncMode.SYNC,
        save_optimizer=False,
        keep_checkpoints=1,
        seed=args.seed,
        precision=args.precision,
        torch_threads=args.threads,
    )
    t0 = time.perf_counter()
    backend = LocalBackend(settings, load_model(args.model))
    served = load_model(args.model)
    if args.precision == "bf16":
        on_compute_thread(served.model.to, torch.bfloat16)  # where the engine computes
    engine = Engine(served, threads=apply_threads(args.threads))
    print(f"loaded {backend.base_model} twice in {time.perf_counter() - t0:.1f}s", flush=True)
    core = TrainerCore(settings, backend)
    tok = engine.tokenizer
    pairs = multiply_pairs()
    params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens)
    rows: list[dict[str, float]] = []
    start = time.perf_counter()
    while time.perf_counter() - start < args.minutes * 60 and len(rows) < args.max_updates:
        version = engine.version
        at = len(rows) * args.prompts
        tasks = [pairs[(at + k) % len(pairs)] for k in range(args.prompts)]
        prompts = [
            list(
                tok.apply_chat_template(
                    [{"role": "user", "content": f"What is {a} times {b}?"}],
                    add_generation_prompt=True,
                )
            )
            for a, b in tasks
        ]
        g0 = time.perf_counter()
        outs = engine.generate(
            [p for p in prompts for _ in range(args.samples)],
            [params] * (args.prompts * args.samples),
        )
        gen_s = time.perf_counter() - g0
        gen_tokens = sum(len(o.token_ids) for o in outs)
        rewards: list[float] = []
        for k, ((a, b), p) in enumerate(zip(tasks, prompts, strict=True)):
            group = outs[k * args.samples : (k + 1) * args.samples]
            ep = episode(settings.run_id, a, b, p, group, [o.text for o in group], version)
            rewards += list(ep.rewards)
            core.batcher.add(ep, core.version)
        train_s = ckpt_s = reload_s = 0.0
        if core.batcher.pending:
            result, event = core.train_pending({})
            train_s, ckpt_s = result.metrics["train_s"], event.metrics["checkpoint_s"]
            reload_s = engine.load_checkpoint(event.checkpoint_uri, event.version)
        row = {
            "version": version,
            "reward": sum(rewards) / len(rewards),
            "gen_s": gen_s,
            "train_s": train_s,
            "checkpoint_s": ckpt_s,
            "reload_s": reload_s,
            "gen_tokens": gen_tokens,
            "tokens_per_s": gen_tokens / gen_s,
            "elapsed_min": (time.perf_counter() - start) / 60,
        }
        rows.append(row)
        print(
            f"v{version:3d} reward {row['reward']:.3f}  gen {gen_s:5.1f}s "
            f"({row['tokens_per_s']:.0f} tok/s)  train {train_s:5.1f}s  ckpt {ckpt_s:4.1f}s  "
            f"reload {reload_s:4.1f}s  t={row['elapsed_min']:.1f}min",
            flush=True,
        )
    summary = summarize(rows, backend.base_model)
    summary["threads"] = {
        "training": backend.threads.summary(),
        "generation": engine.threads_report(),
    }
    return summary


def threads_arg(text: str) -> Threads:
    """``--threads``: ``auto`` or a count."""
    return "auto" if text == "auto" else check_threads(int(text))


def multiply_pairs() -> list[tuple[int, int]]:
    """(a, b) of the ``multiply`` benchmark's tasks, in its order (the pipeline's too)."""
    pairs = []
    for task in load_tasks("multiply"):
        a, b = (int(x) for x in NUM.findall(task.instruction)[:2])
        pairs.append((a, b))
    return pairs


def run_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """The whole loop through the local stack, timed per batch by AgentTrainer."""
    from rllm.infra.stack import stack_up
    from rllm.settings import StackSettings

    stack = StackSettings(services="serve,gateway,processors")
    dtype = "bfloat16" if args.precision == "bf16" else "float32"
    os.environ["RLLM_SERVE_DTYPE"] = dtype
    t0 = time.perf_counter()
    stack_up(stack, say=lambda line: print(line, flush=True))
    print(f"stack up in {time.perf_counter() - t0:.1f}s", flush=True)
    health = httpx.get(f"http://127.0.0.1:{stack.serve_port}/health", timeout=10).json()
    if health.get("dtype") != dtype:
        raise SystemExit(
            f"the running model server generates in {health.get('dtype')}, not {dtype}: "
            f"stop the stack (rllm-cli down) and run again"
        )
    with checkpoint_dir(args) as ckpt:
        return _pipeline(args, stack, ckpt)


def _pipeline(args: argparse.Namespace, stack: Any, ckpt: Path) -> dict[str, Any]:
    from rllm.agent_trainer import AgentTrainer, TrainConfig, UpdateRecord
    from rllm.cli.eval import resolve_model
    from rllm.producers.sdk import builtin_agent
    from rllm.settings import KafkaSettings

    config = TrainConfig(
        run_id=f"perf-pipeline-{uuid.uuid4().hex[:6]}",
        gateway_url=f"http://127.0.0.1:{stack.gateway_port}",
        model=resolve_model("local"),
        group_size=args.samples,
        batch_size=args.prompts,
        epochs=1000,
        max_updates=args.max_updates,
        max_minutes=args.minutes,
        sampling={"temperature": args.temperature, "max_tokens": args.max_tokens},
        trainer={
            "model": args.model,
            "lr": args.lr,
            "micro_batch_size": args.micro_batch,
            "checkpoint_dir": str(ckpt),
            "save_optimizer": False,
            "keep_checkpoints": 2,
            "seed": args.seed,
            "precision": args.precision,
            "torch_threads": args.threads,
        },
    )
    trainer = AgentTrainer(
        builtin_agent("chat"),
        train_dataset=load_tasks("multiply"),
        config=config,
        kafka=KafkaSettings(bootstrap_servers=stack.bootstrap_servers),
    )
    rows: list[dict[str, float]] = []

    def on_update(u: UpdateRecord) -> None:
        overhead = u.update_s - u.train_s - u.checkpoint_s
        row = {
            "version": u.version,
            "reward": u.reward_mean,
            "gen_s": u.rollout_s,
            "train_s": u.train_s,
            "checkpoint_s": u.checkpoint_s,
            "reload_s": max(overhead, 0.0),
            "gen_tokens": u.completion_tokens,
            "tokens_per_s": u.completion_tokens / u.rollout_s if u.rollout_s else 0.0,
            "elapsed_min": u.elapsed_s / 60,
        }
        rows.append(row)
        print(
            f"v{u.version:3d} reward {u.reward_mean:.3f}  rollouts {u.rollout_s:5.1f}s "
            f"({row['tokens_per_s']:.0f} tok/s)  train {u.train_s:5.1f}s  "
            f"ckpt {u.checkpoint_s:4.1f}s  other {overhead:4.1f}s "
            f"(processors, publish, reload)  t={row['elapsed_min']:.1f}min",
            flush=True,
        )

    report = trainer.train(on_update=on_update)
    summary = summarize(rows, args.model or "SmolLM2-135M-Instruct")
    summary["mode"] = "pipeline"
    summary["seconds_other"] = summary.pop("seconds_reload")
    summary["dropped"] = report.drops
    health = httpx.get(f"http://127.0.0.1:{stack.serve_port}/health", timeout=10).json()
    summary["threads"] = {"generation": health.get("torch_threads")}
    return summary


def summarize(rows: list[dict[str, float]], model: str) -> dict[str, Any]:
    if not rows:
        raise SystemExit("no update finished within the time budget")
    first = rows[0]["reward"]
    last5 = rows[-5:]
    reached = next(
        (
            r["elapsed_min"]
            for i, r in enumerate(rows)
            if sum(x["reward"] for x in rows[max(0, i - 2) : i + 1])
            / len(rows[max(0, i - 2) : i + 1])
            >= 0.8
        ),
        None,
    )
    per = [r["gen_s"] + r["train_s"] + r["checkpoint_s"] + r["reload_s"] for r in rows]
    return {
        "model": model,
        "task": "single-digit multiplication",
        "reward_first": round(first, 3),
        "reward_last": round(sum(r["reward"] for r in last5) / len(last5), 3),
        "minutes": round(rows[-1]["elapsed_min"], 2),
        "minutes_to_0_8": None if reached is None else round(reached, 2),
        "updates": len(rows),
        "seconds_per_update": round(sum(per) / len(per), 2),
        "seconds_generation": round(sum(r["gen_s"] for r in rows) / len(rows), 2),
        "seconds_training": round(sum(r["train_s"] for r in rows) / len(rows), 2),
        "seconds_checkpoint": round(sum(r["checkpoint_s"] for r in rows) / len(rows), 2),
        "seconds_reload": round(sum(r["reload_s"] for r in rows) / len(rows), 2),
        "tokens_per_s": round(
            sum(r["gen_tokens"] for r in rows) / sum(r["gen_s"] for r in rows), 1
        ),
        "rewards": [round(r["reward"], 3) for r in rows],
        "seconds": [round(x, 2) for x in per],
        "mode": "in-process",
    }


def plot(curves: dict[str, list[float]], path: str) -> None:
    """Mean reward per batch of rollouts (one policy version each), one line per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, rewards in curves.items():
        ax.plot(range(len(rewards)), rewards, marker="o", label=label)
    ax.legend()
    ax.set_xlabel("batch of rollouts (policy version)")
    ax.set_ylabel("mean reward")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("GRPO, SmolLM2-135M, single-digit multiplication")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="", help="HF dir or .gguf ('' = SmolLM2-135M-Instruct)")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--max-updates", type=int, default=1000)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: generation and training arithmetic in bfloat16 (float32 master weights)",
    )
    ap.add_argument(
        "--threads",
        type=threads_arg,
        default="auto",
        help="torch CPU threads of the in-process loop's trainer and engine, and of the "
        "pipeline's trainer and model server: a count (0: torch's default) or auto (time "
        "the work and keep the faster of 1 and all cores; default)",
    )
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--plot", default=None, help="write the reward curve to this PNG")
    ap.add_argument(
        "--pipeline",
        action="store_true",
        help="gateway -> Kafka -> processors -> trainer instead of in-process",
    )
    ap.add_argument("--compare", action="store_true", help="in-process, then --pipeline")
    ap.add_argument("--pipeline-first", action="store_true", help="--compare in the other order")
    args = ap.parse_args()
    os.environ["RLLM_TORCH_THREADS"] = str(args.threads)  # the model server `up` starts
    if args.compare:
        if args.pipeline_first:  # the machine's speed drifts: swap the order to see it
            from rllm.infra.stack import stack_down
            from rllm.settings import StackSettings

            summary = run_pipeline(args)
            print(json.dumps(summary), flush=True)
            stack_down(StackSettings())  # the in-process loop runs without the stack
            inner = run_in_process(args)
        else:
            inner = run_in_process(args)
            print(json.dumps(inner), flush=True)
            summary = run_pipeline(args)
        summary["in_process"] = inner
        summary["ratio_seconds_per_update"] = round(
            summary["seconds_per_update"] / inner["seconds_per_update"], 2
        )
        # the faster loop reaches the cheap late updates (short answers, uniform groups)
        # sooner; the first n updates of each compare the same stage of training
        n = min(len(inner["seconds"]), len(summary["seconds"]))
        summary["matched_updates"] = n
        summary["ratio_seconds_per_update_matched"] = round(
            sum(summary["seconds"][:n]) / sum(inner["seconds"][:n]), 2
        )
    elif args.pipeline:
        summary = run_pipeline(args)
    else:
        summary = run_in_process(args)
    summary["precision"] = args.precision
    if args.plot:
        curves = {summary["mode"]: summary["rewards"]}
        if "in_process" in summary:
            curves = {"in-process": summary["in_process"]["rewards"], **curves}
        plot(curves, args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
