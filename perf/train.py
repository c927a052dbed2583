"""GRPO on single-digit multiplication with SmolLM2-135M: reward per policy version,
tokens/s and seconds per update (generation, training, checkpoint, weight reload).

Three modes, on the same tasks (the ``multiply`` benchmark, in its fixed order):

- in-process (default): the local model server's engine and the trainer core in one
  process, weights handed over through checkpoints exactly as the server reloads them.
- ``--pipeline``: the whole loop: ``rllm-cli up``'s stack (Kafka, model server, gateway,
  processors; started here when not running) and ``AgentTrainer``: rollouts through the
  gateway, episodes from the processors, the trainer consumer, the server's reload.
- ``--compare``: both in this run, a batch of one and then a batch of the other, each loop
  timed on its own clock (the machine's speed changes 2-4x over minutes here; in turn,
  both loops see the same machine), and their ratio of seconds per update (the issue's
  target: the pipeline at most 1.3x the in-process loop). ``--sequential`` runs the
  in-process loop for ``--minutes`` and then the pipeline instead.

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
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import torch

from rllm.benchmarks.loaders import load_tasks
from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.trainer.core import TrainerCore
from rllm.consumers.trainer.settings import SyncMode, TrainerSettings
from rllm.models.loading import load_model
from rllm.models.threads import Threads, apply_threads, check_threads, on_compute_thread
from rllm.processors.advantages import grpo_advantages
from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.serving.engine import Engine, SamplingParams

NUM = re.compile(r"-?\d+")


def reward(answer: str, a: int, b: int) -> float:
    """1.0 when the last number in the answer is a*b."""
    nums = NUM.findall(answer)
    return 1.0 if nums and int(nums[-1]) == a * b else 0.0


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
        advantages=tuple(float(a) for a in grpo_advantages(rewards)),
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
        loop = InProcessLoop(args, ckpt)
        while not loop.done():
            loop.step()
        return loop.summary()


class InProcessLoop:
    """The reference loop, one batch per ``step()``; its clock counts its own batches
    only, so ``--compare`` can run it between the pipeline's batches."""

    def __init__(self, args: argparse.Namespace, ckpt: Path) -> None:
        self.args = args
        self.settings = TrainerSettings(
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
        self.backend = LocalBackend(self.settings, load_model(args.model))
        served = load_model(args.model)
        if args.precision == "bf16":
            on_compute_thread(served.model.to, torch.bfloat16)  # where the engine computes
        self.engine = Engine(served, threads=apply_threads(args.threads))
        print(
            f"loaded {self.backend.base_model} twice in {time.perf_counter() - t0:.1f}s", flush=True
        )
        self.core = TrainerCore(self.settings, self.backend)
        self.pairs = multiply_pairs()
        self.params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens)
        # one group sampled before the clock starts, as the pipeline's warm_up does
        a, b = self.pairs[0]
        first = self.prompt(a, b)
        self.engine.generate([first] * args.samples, [self.params] * args.samples)
        self.rows: list[dict[str, float]] = []
        self.spent = 0.0
        """Seconds of this loop's own batches."""

    def done(self) -> bool:
        return bool(self.spent >= self.args.minutes * 60 or len(self.rows) >= self.args.max_updates)

    def prompt(self, a: int, b: int) -> list[int]:
        messages = [{"role": "user", "content": f"What is {a} times {b}?"}]
        return list(self.engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True))

    def step(self) -> None:
        """Sample one batch, train on it, hand the weights to the engine."""
        args, engine, core = self.args, self.engine, self.core
        began = time.perf_counter()
        version = engine.version
        at = len(self.rows) * args.prompts
        tasks = [self.pairs[(at + k) % len(self.pairs)] for k in range(args.prompts)]
        prompts = [self.prompt(a, b) for a, b in tasks]
        g0 = time.perf_counter()
        outs = engine.generate(
            [p for p in prompts for _ in range(args.samples)],
            [self.params] * (args.prompts * args.samples),
        )
        gen_s = time.perf_counter() - g0
        gen_tokens = sum(len(o.token_ids) for o in outs)
        rewards: list[float] = []
        for k, ((a, b), p) in enumerate(zip(tasks, prompts, strict=True)):
            group = outs[k * args.samples : (k + 1) * args.samples]
            ep = episode(self.settings.run_id, a, b, p, group, [o.text for o in group], version)
            rewards += list(ep.rewards)
            core.batcher.add(ep, core.version)
        train_s = ckpt_s = reload_s = 0.0
        if core.batcher.pending:
            result, event = core.train_pending({})
            train_s, ckpt_s = result.metrics["train_s"], event.metrics["checkpoint_s"]
            reload_s = engine.load_checkpoint(event.checkpoint_uri, event.version)
        self.spent += time.perf_counter() - began
        row = {
            "version": version,
            "reward": sum(rewards) / len(rewards),
            "gen_s": gen_s,
            "train_s": train_s,
            "checkpoint_s": ckpt_s,
            "reload_s": reload_s,
            "gen_tokens": gen_tokens,
            "tokens_per_s": gen_tokens / gen_s,
            "elapsed_min": self.spent / 60,
        }
        self.rows.append(row)
        print(
            f"v{version:3d} reward {row['reward']:.3f}  gen {gen_s:5.1f}s "
            f"({row['tokens_per_s']:.0f} tok/s)  train {train_s:5.1f}s  ckpt {ckpt_s:4.1f}s  "
            f"reload {reload_s:4.1f}s  t={row['elapsed_min']:.1f}min",
            flush=True,
        )

    def summary(self) -> dict[str, Any]:
        summary = summarize(self.rows, self.backend.base_model)
        summary["threads"] = {
            "training": self.backend.threads.summary(),
            "generation": self.engine.threads_report(),
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


def run_pipeline(
    args: argparse.Namespace, between: Callable[[], object] | None = None
) -> dict[str, Any]:
    """The whole loop through the local stack, timed per batch by AgentTrainer; with
    ``between``, that runs after each batch and the pipeline's clock counts its own batches
    only."""
    from rllm.cli.stack import stack_settings
    from rllm.infra.stack import stack_up

    stack = stack_settings(services="serve,gateway,processors")
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
    print(f"stack warmed up in {warm_up(args, stack):.1f}s", flush=True)
    with checkpoint_dir(args) as ckpt:
        return _pipeline(args, stack, ckpt, between)


def warm_up(args: argparse.Namespace, stack: Any) -> float:
    """One group of rollouts through the stack, waited for until its episode comes out of
    the processors, before the clock starts. A stack just started spends 40-70 s in its
    first batch here (the processors join their group and restore their tables while the
    server generates for the first time): startup, as the in-process loop's model loading
    is, not time per update. Returns its seconds."""
    from rllm.cli.eval import resolve_model
    from rllm.consumers.tail import tail_topic
    from rllm.producers.evaluation.runner import run_tasks
    from rllm.producers.sdk import builtin_agent
    from rllm.producers.sdk.client import GatewayClient
    from rllm.schemas.topics import EPISODES
    from rllm.settings import KafkaSettings

    kafka = KafkaSettings(bootstrap_servers=stack.bootstrap_servers)
    run_id = f"perf-warm-up-{uuid.uuid4().hex[:6]}"
    came_out = threading.Event()

    def watch() -> None:
        for record in tail_topic(kafka, EPISODES, follow=True):
            if getattr(record.event, "run_id", None) == run_id:
                came_out.set()
                return

    threading.Thread(target=watch, name="perf-warm-up", daemon=True).start()
    time.sleep(1.0)  # the tail takes the topic's end offsets before the episode is sent
    t0 = time.perf_counter()

    async def rollouts() -> None:
        gateway = GatewayClient(f"http://127.0.0.1:{stack.gateway_port}")
        try:
            await run_tasks(
                load_tasks("multiply")[:1],
                builtin_agent("chat"),
                gateway,
                run_id=run_id,
                model=resolve_model("local"),
                attempts=args.samples,
                concurrency=args.samples,
                sampling={"temperature": args.temperature, "max_tokens": args.max_tokens},
            )
        finally:
            await gateway.aclose()

    asyncio.run(rollouts())
    if not came_out.wait(300):
        raise SystemExit(
            f"the warm-up's episode (run {run_id}) did not come out of the processors within "
            "300 s; are they running (rllm-cli status)?"
        )
    return time.perf_counter() - t0


def _pipeline(
    args: argparse.Namespace, stack: Any, ckpt: Path, between: Callable[[], object] | None
) -> dict[str, Any]:
    from rllm.app import AgentTrainer, TrainConfig, UpdateRecord
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
        max_minutes=0 if between else args.minutes,  # else on_update stops it
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
            "min_flush_episodes": args.min_flush_episodes,
        },
    )
    trainer = AgentTrainer(
        builtin_agent("chat"),
        train_dataset=load_tasks("multiply"),
        config=config,
        kafka=KafkaSettings(bootstrap_servers=stack.bootstrap_servers),
    )
    rows: list[dict[str, float]] = []
    spent = 0.0  # seconds of the pipeline's own batches

    def on_update(u: UpdateRecord) -> bool:
        nonlocal spent
        spent += u.seconds
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
            "elapsed_min": (spent if between else u.elapsed_s) / 60,
        }
        rows.append(row)
        print(
            f"v{u.version:3d} reward {u.reward_mean:.3f}  rollouts {u.rollout_s:5.1f}s "
            f"({row['tokens_per_s']:.0f} tok/s)  train {u.train_s:5.1f}s  "
            f"ckpt {u.checkpoint_s:4.1f}s  other {overhead:4.1f}s "
            f"(processors, publish, reload)  t={row['elapsed_min']:.1f}min",
            flush=True,
        )
        if between is None:
            return True
        between()
        return bool(spent < args.minutes * 60)

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


@contextlib.contextmanager
def stack_stopped(home: Path) -> Iterator[int]:
    """The stack's Python services (model server, gateway, processors) stopped (SIGSTOP)
    and then continued, so the in-process loop's batches do not share the machine with
    them. Kafka runs on (about 0.07 of a core when idle): a broker stopped for longer than
    its 9 s session with its own controller is fenced when it continues. Yields how many
    processes it stopped; a pid file whose process is not the stack's is left alone."""
    stopped: list[int] = []
    try:
        for pid_file in sorted((home / "run").glob("*.pid")):
            try:
                pid = int(pid_file.read_text().split()[0])
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
            if b"rllm.cli" in command:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        yield len(stopped)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def compare_interleaved(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pipeline's batches and the in-process loop's in turn, each loop on its own
    clock: a change of the machine's speed (2-4x here, over minutes) reaches both alike.
    The stack is stopped while the in-process loop runs a batch (``stack_stopped``)."""
    from rllm.settings import StackSettings

    home = StackSettings().home
    # the processors' consumer group outlasts a stopped batch (up to ~15 s when slow) if
    # this run starts them (rllm-cli down first); their default session is 10 s
    os.environ.setdefault("RLLM_SESSION_TIMEOUT_S", "60")
    with checkpoint_dir(args) as ckpt:
        inner = InProcessLoop(args, ckpt)

        def between() -> None:
            if not inner.done():
                with stack_stopped(home):
                    inner.step()

        summary = run_pipeline(args, between=between)
        while not inner.done():
            inner.step()
        return summary, inner.summary()


def compare_sequential(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """In-process for ``--minutes``, then the pipeline (or the other order)."""
    if not args.pipeline_first:
        inner = run_in_process(args)
        print(json.dumps(inner), flush=True)
        return run_pipeline(args), inner
    from rllm.infra.stack import stack_down
    from rllm.settings import StackSettings

    summary = run_pipeline(args)
    print(json.dumps(summary), flush=True)
    stack_down(StackSettings())  # the in-process loop runs without the stack
    return summary, run_in_process(args)


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
    ap.add_argument(
        "--min-flush-episodes",
        type=int,
        default=1,
        help="--pipeline: a batch with fewer kept groups waits for the next one's",
    )
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
    ap.add_argument(
        "--compare",
        action="store_true",
        help="both loops, a batch of each in turn, each timed on its own clock",
    )
    ap.add_argument(
        "--sequential",
        action="store_true",
        help="--compare as in-process for --minutes, then the pipeline",
    )
    ap.add_argument("--pipeline-first", action="store_true", help="--sequential in the other order")
    args = ap.parse_args()
    os.environ["RLLM_SERVE_TORCH_THREADS"] = str(args.threads)  # the model server `up` starts
    if args.compare:
        if args.sequential:
            summary, inner = compare_sequential(args)
        else:
            summary, inner = compare_interleaved(args)
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
