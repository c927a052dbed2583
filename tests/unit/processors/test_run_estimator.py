"""The run's estimator travels with its tasks: one processors deployment, many estimators."""

from __future__ import annotations

import pytest

from rllm.errors import ConfigError
from rllm.processors.assemble import assemble_trajectory
from rllm.processors.group import GroupBook, build_episode
from rllm.processors.settings import ProcessorSettings
from rllm.processors.types import Output
from rllm.schemas.codec import AvroCodec
from rllm.schemas.run import RUN_ESTIMATOR_KEY, run_estimator, with_run_estimator
from rllm.schemas.types import Task, TrajectoryAssembled
from tests.unit.processors.factory import make_session, task

CODEC = AvroCodec()
GRPO_DEPLOYMENT = ProcessorSettings(estimator="grpo")


def _scored(the_task: Task, session: str, reward: float, index: int) -> TrajectoryAssembled:
    traj = assemble_trajectory(
        make_session(session, the_task=the_task, rollout_index=index, group_size=2)
    )
    return traj.model_copy(update={"reward": reward})


def test_task_metadata_names_the_estimator_and_keeps_the_rest() -> None:
    named = with_run_estimator(task("t").model_copy(update={"metadata_json": '{"a": 1}'}), "rloo")
    assert named.metadata == {"a": 1, RUN_ESTIMATOR_KEY: "rloo"}
    assert run_estimator(named.metadata_json) == "rloo"
    assert run_estimator("{}") is None
    with pytest.raises(ValueError, match="must name an estimator, got 3"):
        run_estimator(f'{{"{RUN_ESTIMATOR_KEY}": 3}}')


def test_the_runs_estimator_wins_over_the_deployments_setting() -> None:
    rloo_task = with_run_estimator(task("t"), "rloo")
    trajs = [_scored(rloo_task, "a", 1.0, 0), _scored(rloo_task, "b", 0.0, 1)]
    ep = build_episode("run-r", rloo_task, trajs, 2, GRPO_DEPLOYMENT)
    assert ep.estimator == "rloo" and ep.advantages == (1.0, -1.0)
    plain = build_episode(
        "run-g",
        task("t"),
        [_scored(task("t"), "a", 1.0, 0), _scored(task("t"), "b", 0.0, 1)],
        2,
        GRPO_DEPLOYMENT,
    )
    assert plain.estimator == "grpo"
    assert plain.advantages == pytest.approx((0.5**0.5, -(0.5**0.5)), abs=1e-5)


def test_the_fast_path_carries_the_runs_estimator_and_refuses_an_unknown_one() -> None:
    book = GroupBook(GRPO_DEPLOYMENT, {}, {}, CODEC, "rllm.trajectories")
    pp = with_run_estimator(task("t"), "reinforce_plus_plus_baseline")
    a, b = _scored(pp, "a", 1.0, 0), _scored(pp, "b", 0.0, 1)
    assert book.on_trajectory(a, CODEC.encode(a), 0, 0, 0.0) == []
    (emit,) = book.on_trajectory(b, CODEC.encode(b), 0, 1, 0.0)
    ep = CODEC.decode(emit.value or b"")
    assert ep.estimator == "reinforce_plus_plus_baseline" and ep.advantages == (0.5, -0.5)

    bad = with_run_estimator(task("u"), "ppo")
    c, d = _scored(bad, "c", 1.0, 0), _scored(bad, "d", 0.0, 1)
    assert book.on_trajectory(c, CODEC.encode(c), 0, 2, 0.0) == []
    (letter,) = book.on_trajectory(d, CODEC.encode(d), 0, 3, 0.0)
    assert letter.output == Output.DEAD_LETTERS
    assert letter.record is not None
    reason = letter.record.reason  # type: ignore[attr-defined]  # a DeadLetter record
    assert "run 'run-1'" in reason and "'ppo'" in reason and "rloo" in reason
    with pytest.raises(ConfigError, match="estimator 'ppo'"):
        build_episode("run-1", bad, [c, d], 2, GRPO_DEPLOYMENT)
