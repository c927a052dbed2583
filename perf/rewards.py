"""Throughput of the reward functions on real-format inputs; prints figures, JSON last line.

Run: ``python perf/rewards.py``. The ``code`` figure includes a bubblewrap sandbox start
per call; ``math`` includes math-verify's parsing of both sides.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from rllm.benchmarks import get_reward_fn, load_tasks
from rllm.schemas.types import Task

__all__ = ["main"]


def _task(truth: object, reward_fn: str, **metadata: object) -> Task:
    return Task(
        task_id="p",
        instruction="q",
        ground_truth_json=json.dumps(truth),
        reward_fn=reward_fn,
        metadata_json=json.dumps(metadata),
    )


def _rate(fn: Callable[[], object], seconds: float = 1.0) -> float:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        count += 1
    return count / (time.perf_counter() - start)


def main() -> None:
    """Measure calls per second of each grader on one core."""
    humaneval = load_tasks("humaneval", max_examples=1)[0]
    body = (
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
        " for b in numbers[i + 1:])\n"
    )
    ifeval_truth = {
        "instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
        "kwargs": [{}, {"num_words": 50, "relation": "at least"}],
        "prompt": "p",
    }
    cases: dict[str, tuple[Task, str]] = {
        "math": (_task("\\frac{1}{2}", "math"), "Step by step... so \\boxed{0.5}"),
        "mcq": (_task("C", "mcq"), "A is wrong and B too. The answer is (C)."),
        "f1": (_task(["Denver Broncos"], "f1"), "Answer: the Denver Broncos"),
        "chrf": (_task("Die Katze schläft auf dem Sofa.", "chrf"), "Die Katze schläft."),
        "anls": (_task(["university of california"], "anls"), "Answer: Universty of California"),
        "ifeval": (_task(ifeval_truth, "ifeval"), " ".join(["word"] * 60)),
        "code": (humaneval, body),
    }
    figures: dict[str, float] = {}
    for name, (task, answer) in cases.items():
        grader = get_reward_fn(name)
        grader(task, answer)  # warm up (imports, first parse)
        figures[f"{name}_per_s"] = round(_rate(lambda g=grader, t=task, a=answer: g(t, a)), 1)
        print(f"{name:8s} {figures[f'{name}_per_s']:10.1f} calls/s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
