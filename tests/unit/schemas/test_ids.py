"""The events' ids, keys and dedup rule (``rllm.schemas.ids``): one definition that the
processors write with and every consumer reads by."""

from __future__ import annotations

from dataclasses import dataclass

from rllm.processors import dedup_by_event_id as exported
from rllm.schemas.ids import dedup_by_event_id, episode_id, group_key, trajectory_id
from tests.unit.processors.factory import make_session, task


@dataclass(frozen=True)
class _Record:
    event_id: str
    copy: int


def test_ids_and_keys_are_deterministic_and_distinct() -> None:
    assert trajectory_id("s1") == "traj:s1"
    assert episode_id("run-1", "t/7") == "ep:run-1/t/7"
    assert group_key("run-1", "t/7") == "run-1/t/7"
    assert episode_id("run-1", "t") != trajectory_id("run-1/t")


def test_first_record_per_event_id_wins_in_order() -> None:
    records = [_Record("b", 0), _Record("a", 0), _Record("b", 1), _Record("c", 0), _Record("a", 1)]
    kept = dedup_by_event_id(records)
    assert kept == [_Record("b", 0), _Record("a", 0), _Record("c", 0)]
    assert exported is dedup_by_event_id  # rllm.processors re-exports the one rule


def test_the_processors_key_and_name_trajectories_and_episodes_by_these_rules() -> None:
    from rllm.processors import ProcessorSettings, assemble_trajectory, build_episode

    events = make_session("s9", the_task=task("t3"), rollout_index=0, group_size=1, num_steps=1)
    traj = assemble_trajectory(events)
    assert traj.event_id == trajectory_id("s9")
    episode = build_episode(traj.run_id, traj.task, [traj], 1, ProcessorSettings())
    assert episode.event_id == episode_id(traj.run_id, "t3")
    assert [t.event_id for t in episode.trajectories] == ["traj:s9"]
