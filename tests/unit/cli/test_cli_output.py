"""Output for people and for scripts: tables are whole tab-separated rows in a pipe, the
stack's rows line up, a training run ends in words rather than a Python dict, summaries
print well, and the examples' grader scores a correct sentence as correct."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from rich.table import Table

from rllm.app import TrainReport, describe_drops
from rllm.cli.common import table_lines
from rllm.cli.main import cli
from rllm.cli.stack import _print
from rllm.infra.stack import ComponentStatus
from rllm.producers.evaluation.summary import EvalSummary
from tests.paths import ROOT
from tests.unit.app.factory import update_record


def test_bench_list_in_a_pipe_is_one_whole_line_per_benchmark() -> None:
    from rllm.benchmarks import all_benchmarks

    res = CliRunner().invoke(cli, ["bench", "list"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    specs = all_benchmarks(None)
    assert lines[0] == "name\tcategory\tdataset\tsplit\treward\tagent\tneeds"
    assert len(lines) == 1 + len(specs) == 85
    assert all(line.count("\t") == 6 for line in lines)
    assert [line.split("\t")[0] for line in lines[1:]] == [s.name for s in specs]
    gsm8k = next(line.split("\t") for line in lines if line.startswith("gsm8k\t"))
    assert gsm8k[:5] == ["gsm8k", "math", "openai/gsm8k [main]", "test", "math"]
    assert res.stderr == "84 benchmarks\n"  # the title, out of the data


def test_table_lines_strip_markup_and_fold_nothing() -> None:
    table = Table(title="ignored in a pipe")
    table.add_column("task")
    table.add_column("notes")
    table.add_row("a-very-long-task-name-" * 5, "[red]bad[/red]\n[yellow]odd\tthing[/yellow]")
    assert table_lines(table) == ["task\tnotes", f"{'a-very-long-task-name-' * 5}\tbad; odd thing"]
    headless = Table(show_header=False)
    headless.add_column()
    headless.add_column()
    headless.add_row("name", "gsm8k")
    assert table_lines(headless) == ["name\tgsm8k"]


def test_stack_rows_line_up_whatever_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    _print(
        [
            ComponentStatus("kafka", True, "127.0.0.1:9092", "data in /h/kafka"),
            ComponentStatus("processors", True, "-", "log /h/logs/processors.log"),
            ComponentStatus("gateway", False, "http://127.0.0.1:8400", "not running"),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "up   kafka      127.0.0.1:9092        data in /h/kafka",
        "up   processors -                     log /h/logs/processors.log",
        "down gateway    http://127.0.0.1:8400 not running",
    ]


def test_drops_read_as_words() -> None:
    drops = {
        "dropped_stale_episodes": 0.0,
        "dropped_uniform_episodes": 12.0,
        "refused_wrong_estimator_episodes": 1.0,
        "skipped_duplicate_episodes": 2.0,
    }
    assert describe_drops(drops) == (
        "12 uniform episodes dropped, 1 wrong estimator episodes refused, "
        "2 duplicate episodes skipped"
    )
    assert describe_drops({"dropped_stale_episodes": 0.0}) == "nothing dropped or refused"


# the figures of every batch in the report below
BATCH = {
    "reward_mean": 0.225,
    "accuracy": 0.22,
    "rollouts": 32,
    "seconds": 9.5,
    "rollout_s": 3.1,
    "update_s": 6.4,
    "train_s": 2.0,
    "elapsed_s": 30.0,
}


def test_a_train_report_prints_a_line_per_batch_and_its_drops() -> None:
    report = TrainReport(
        run_id="r1",
        updates=[update_record(1, 0, **BATCH), update_record(1, 1, **BATCH)],
        version=1,
        drops={"dropped_uniform_episodes": 4.0},
    )
    assert str(report).splitlines() == [
        "run r1: 2 batches, 1 update, policy version 1",
        "  batch 1: rollouts of v0: reward 0.225 (22% correct) -> v1; rollouts 3.1s, train "
        "2.0s, wait for the new version 6.4s, t=0.5 min",
        "  batch 2: rollouts of v1: reward 0.225 (22% correct) -> no update; rollouts 3.1s, "
        "train 2.0s, wait for the new version 6.4s, t=0.5 min",
        "  4 uniform episodes dropped",
    ]
    assert repr(report) == (
        "TrainReport(run_id='r1', batches=2, version=1, drops='4 uniform episodes dropped')"
    )
    assert "{" not in str(report)


def test_an_eval_summary_prints_its_figures_and_first_errors() -> None:
    summary = EvalSummary(
        run_id="r-val",
        benchmark="multiply",
        model="m",
        tasks=81,
        attempts=1,
        accuracy=0.123,
        mean_reward=0.123,
        pass_at={1: 0.123},
        errors=7,
        prompt_tokens=7066,
        completion_tokens=2345,
        steps=81,
        latency_p50_s=1.2,
        latency_p95_s=3.4,
        seconds=45.25,
        failures=[{"task": f"t{i}", "error": "boom"} for i in range(7)],
        policy_version=0,
    )
    assert str(summary).splitlines() == [
        "multiply · m · run r-val",
        "  81 tasks x 1 attempt · accuracy 12.3% · mean reward 0.123",
        "  tokens in/out 7,066/2,345 · 81 model calls · latency p50/p95 1.20s/3.40s · 45.2s",
        "  7 errors · policy version 0 (base weights)",
        *[f"  error t{i}: boom" for i in range(5)],
        "  ... and 2 more errors",
    ]
    assert repr(summary) == (
        "EvalSummary(run_id='r-val', benchmark='multiply', model='m', tasks=81, attempts=1, "
        "accuracy=0.123, mean_reward=0.123, errors=7, seconds=45.2)"
    )


@pytest.mark.parametrize(
    ("task_id", "answer", "reward"),
    [
        ("mul-7-8", "7 times 8 is 56.", 1.0),
        ("mul-7-8", "56", 1.0),
        ("mul-7-8", "The answer is 54.", 0.0),
        ("mul-6-9", "6 times 9 is 54", 1.0),
        ("mul-6-9", "I don't know.", 0.0),
    ],
)
def test_the_examples_grade_a_correct_sentence_as_correct(
    task_id: str, answer: str, reward: float
) -> None:
    from examples._run import TASKS
    from rllm.benchmarks.rewards import get_reward_fn

    task = next(t for t in TASKS if t.task_id == task_id)
    assert get_reward_fn(task.reward_fn)(task, answer).reward == reward


def test_the_shipped_gsm8k_sample_loads_and_its_answers_grade_correct() -> None:

    from rllm.benchmarks.loaders import load_tasks
    from rllm.benchmarks.rewards import get_reward_fn

    sample = ROOT / "examples" / "data" / "gsm8k-sample.jsonl"
    tasks = load_tasks("gsm8k", data_file=sample)
    assert [t.ground_truth for t in tasks] == ["14", "35", "15", "114", "135"]
    math = get_reward_fn(tasks[0].reward_fn)
    for task in tasks:
        assert math(task, f"So the answer is \\boxed{{{task.ground_truth}}}.").is_correct
        assert not math(task, "\\boxed{1}").is_correct


def _down_url() -> str:
    from tests.ports import free_broker_port

    return f"http://127.0.0.1:{free_broker_port()}"


def test_eval_with_the_stack_down_is_one_line_naming_up() -> None:
    url = _down_url()
    res = CliRunner().invoke(cli, ["eval", "multiply", "-n", "2", "--gateway-url", url])
    assert res.exit_code == 1, res.output
    assert res.stdout == ""
    said = res.stderr.splitlines()
    assert said[0].startswith("eval multiply · model ") and len(said) == 2, said
    assert said[1].startswith(f"error: the gateway at {url} does not answer (ConnectError")
    assert "start the stack with `rllm-cli up`" in said[1]
    assert "retrying" not in res.output and "attempt 1" not in res.output


def test_the_python_api_with_the_stack_down_says_up_before_any_rollout() -> None:
    import rllm
    from rllm.errors import ConfigError, KafkaUnavailableError
    from rllm.schemas.types import Task
    from rllm.settings import KafkaSettings
    from tests.ports import free_broker_port
    from tests.unit.producers.sdk.agents import counting_agent

    calls: list[str] = []
    url = _down_url()
    trainer = rllm.AgentTrainer(
        counting_agent(calls),
        train_dataset=[Task(task_id="t")],
        val_dataset=[Task(task_id="v")],
        config={"gateway_url": url},
        kafka=KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_broker_port()}"),
    )
    with pytest.raises(ConfigError, match=rf"the gateway at {url} does not answer.*rllm-cli up"):
        trainer.evaluate()
    with pytest.raises(KafkaUnavailableError, match=r"rllm-cli up"):
        trainer.train()
    assert calls == []


def test_progress_lines_come_about_every_tenth_and_at_the_end() -> None:
    import io
    import re

    from rllm.benchmarks.types import RewardResult
    from rllm.producers.evaluation.progress import ProgressLines
    from rllm.producers.sdk.types import RolloutOutcome
    from rllm.schemas.types import SessionStatus, Task

    def outcome(i: int, status: SessionStatus = SessionStatus.OK) -> RolloutOutcome:
        return RolloutOutcome(
            f"s{i}", "r", Task(task_id=f"t{i}"), 0, status, "x", None, None, 1, 0.1
        )

    out = io.StringIO()
    lines = ProgressLines("evaluate r-val", 81, stream=out)
    for i in range(81):
        failed = i == 40
        lines(
            outcome(i, SessionStatus.ERROR if failed else SessionStatus.OK),
            None if failed else RewardResult(reward=float(i % 2), is_correct=bool(i % 2)),
        )
    said = out.getvalue().splitlines()
    assert [re.sub(r", [\d.]+ s$", "", line) for line in said] == [
        f"evaluate r-val: {n}/81 attempts, {c} correct, {e} error{'' if e == 1 else 's'}"
        for n, c, e in [
            (9, 4, 0),
            (18, 9, 0),
            (27, 13, 0),
            (36, 18, 0),
            (45, 22, 1),
            (54, 27, 1),
            (63, 31, 1),
            (72, 36, 1),
            (81, 40, 1),
        ]
    ]
    few = io.StringIO()
    three = ProgressLines("x", 3, stream=few)
    for i in range(3):
        three(outcome(i), RewardResult(reward=1.0, is_correct=True))
    assert [line.split(",")[0] for line in few.getvalue().splitlines()] == [
        "x: 1/3 attempts",
        "x: 2/3 attempts",
        "x: 3/3 attempts",
    ]


def test_the_python_api_is_bounded_and_finds_the_gateway_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rllm.app import TrainConfig

    monkeypatch.setenv("RLLM_GATEWAY_URL", "http://127.0.0.1:8499")
    config = TrainConfig()
    assert config.sampling == {"temperature": 1.0, "max_tokens": 64}
    assert config.gateway_url == "http://127.0.0.1:8499"
    monkeypatch.delenv("RLLM_GATEWAY_URL")
    assert TrainConfig().gateway_url == "http://127.0.0.1:8400"
