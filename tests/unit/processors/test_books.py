"""The session and group state machines over plain dicts, with explicit clocks."""

from __future__ import annotations

from typing import Any

from rllm.processors.group import GroupBook, build_episode
from rllm.processors.sessions import SessionBook
from rllm.processors.settings import ProcessorSettings
from rllm.processors.types import Emit, Output
from rllm.schemas.codec import AvroCodec
from rllm.schemas.delta import restore_steps
from rllm.schemas.types import RewardAssigned, SessionEvent, TrajectoryAssembled
from tests.unit.processors.factory import T0, make_session, task

CODEC = AvroCodec()
SETTINGS = ProcessorSettings(
    reward_wait_s=10, idle_timeout_s=60, closed_retention_s=100, group_timeout_s=30
)


def rec(emit: Emit) -> Any:
    """The record an emit carries (fast paths carry it encoded)."""
    return emit.record if emit.record is not None else CODEC.decode(emit.value or b"")


def _book() -> SessionBook:
    return SessionBook(SETTINGS, {}, {}, CODEC, "rllm.session-events")


def _feed(book: SessionBook, events: list[SessionEvent], now: float) -> list[object]:
    out = []
    for i, ev in enumerate(events):
        out += book.on_event(ev, CODEC.encode(ev), 0, i, now)
    return out


def test_task_without_reward_fn_waits_reward_wait_s_for_a_reward() -> None:
    book = _book()
    no_fn = task(reward_fn=None)
    assert _feed(book, make_session("a", the_task=no_fn), now=100.0) == []
    assert _feed(book, make_session("b", the_task=no_fn), now=100.0) == []
    assert book.due_keys(109.0) == [] and book.on_tick("a", 109.0) == []
    reward = SessionEvent(
        event_id="a/r",
        session_id="a",
        run_id="run-1",
        emitted_at=T0,
        payload=RewardAssigned(reward=0.9, evaluator="judge"),
    )
    (emit,) = book.on_event(reward, CODEC.encode(reward), 0, 9, 105.0)
    assert emit.output == Output.SCORING and rec(emit).reward == 0.9
    assert book.due_keys(110.0) == [("b", 0)]
    (late,) = book.on_tick("b", 110.0)
    assert rec(late).reward is None
    assert "reward_wait_s=10" in rec(late).reward_error
    assert book.events == {}  # raw events dropped once the trajectory is out


def test_reward_fn_or_early_reward_emits_at_close() -> None:
    book = _book()
    assert len(_feed(book, make_session("a"), now=1.0)) == 1
    assert (
        len(_feed(book, make_session("b", the_task=task(reward_fn=None), reward=1.0), now=1.0)) == 1
    )


def test_duplicates_late_events_idle_timeout_and_retention() -> None:
    book = _book()
    events = make_session("a", close=False)
    assert _feed(book, events + events[:2], now=0.0) == []
    assert book.stats.duplicates == 2
    assert book.on_tick("a", 59.0) == []
    (emit,) = book.on_tick("a", 60.0)
    assert rec(emit).flags == ("idle_timeout",)
    assert _feed(book, events[:1], now=61.0) == []  # a known event: still just a duplicate
    late = events[1].model_copy(update={"event_id": "a/late"})
    (report,) = _feed(book, [late], now=62.0)
    assert report.output == Output.DEAD_LETTERS
    assert "late StepCaptured" in rec(report).reason
    assert book.on_tick("a", 159.0) == [] and book.header("a") is not None
    assert book.on_tick("a", 160.0) == [] and book.header("a") is None


def test_an_event_lost_in_a_crash_is_stored_again_on_redelivery() -> None:
    """The headers' changelog kept step 1's id, the events' did not: its redelivery is
    stored, not dropped as a duplicate, so the trajectory has every step."""
    book = _book()
    events = make_session("a", close=False)
    assert _feed(book, events, now=0.0) == []
    lost = [k for k in book.events if k.endswith(events[1].event_id.encode())]
    assert len(lost) == 1
    del book.events[lost[0]]  # what the restarted worker restored
    closing = make_session("a")[len(events) :]
    assert _feed(book, events[1:2], now=1.0) == []  # the redelivery
    (emit,) = _feed(book, closing, now=2.0)
    traj = rec(emit)
    assert traj.flags == () and len(traj.steps) == len(events) - 1
    assert book.stats.duplicates == 0


def _scored(session: str, reward: float, index: int, size: int = 3) -> TrajectoryAssembled:
    from rllm.processors.assemble import assemble_trajectory

    traj = assemble_trajectory(
        make_session(session, the_task=task("t"), rollout_index=index, group_size=size)
    )
    return traj.model_copy(update={"reward": reward})


def test_group_completes_dedups_times_out_and_reports_late() -> None:
    members: dict[bytes, bytes] = {}
    book = GroupBook(SETTINGS, {}, members, CODEC, "rllm.trajectories")
    a, b, c = _scored("a", 1.0, 2), _scored("b", 0.0, 0), _scored("c", 0.0, 1)
    assert all(s.prompt_prefix_len == 0 for s in a.steps)
    assert book.on_trajectory(a, CODEC.encode(a), 0, 0, 0.0) == []
    assert book.on_trajectory(a, CODEC.encode(a), 0, 1, 0.0) == []  # duplicate
    assert book.on_trajectory(b, CODEC.encode(b), 0, 2, 1.0) == []
    stored = CODEC.decode(members[b"run-1/t\x00a"])
    assert [s.prompt_prefix_len for s in stored.steps] == [0, 7, 13]  # kept delta-encoded
    assert book.on_tick("run-1/t", 29.0) == []
    (emit,) = book.on_tick("run-1/t", 30.0)
    assert emit.value is not None
    episode = CODEC.decode(emit.value)
    assert emit.key == b"run-1/t" and episode.is_partial
    assert [t.session_id for t in episode.trajectories] == ["b", "a"]
    # carried delta-encoded, restored byte for byte
    assert [s.prompt_prefix_len for s in episode.trajectories[1].steps] == [0, 7, 13]
    restored = [
        t.model_copy(update={"steps": tuple(restore_steps(t.steps)[0])})
        for t in episode.trajectories
    ]
    assert restored == [b, a]
    (late,) = book.on_trajectory(c, CODEC.encode(c), 0, 3, 31.0)
    assert late.output == Output.DEAD_LETTERS and "late trajectory c" in rec(late).reason


def test_a_member_lost_in_a_crash_is_stored_again_on_redelivery() -> None:
    """The headers' changelog kept session a, the members' did not (a crash between the
    two writes): the redelivered trajectory is not a duplicate, and the group waits for it
    instead of going out without it."""
    headers: dict[bytes, bytes] = {}
    members: dict[bytes, bytes] = {}
    book = GroupBook(SETTINGS, headers, members, CODEC, "rllm.trajectories")
    a, b, c = _scored("a", 1.0, 0), _scored("b", 0.0, 1), _scored("c", 0.0, 2)
    assert book.on_trajectory(a, CODEC.encode(a), 0, 0, 0.0) == []
    assert book.on_trajectory(b, CODEC.encode(b), 0, 1, 0.0) == []
    del members[b"run-1/t\x00a"]  # what the restarted worker restored
    assert book.on_trajectory(c, CODEC.encode(c), 0, 2, 1.0) == []  # a is still missing
    (emit,) = book.on_trajectory(a, CODEC.encode(a), 0, 0, 2.0)  # the redelivery
    episode = rec(emit)
    assert [t.session_id for t in episode.trajectories] == ["a", "b", "c"]
    assert not episode.is_partial and book.stats.duplicates == 0
    assert book.on_trajectory(a, CODEC.encode(a), 0, 0, 3.0) == []  # now it is one
    assert book.stats.duplicates == 1


def test_build_episode_orders_by_rollout_and_counts_missing_reward_as_zero() -> None:
    trajs = [_scored("a", 1.0, 1), _scored("b", 0.0, 0).model_copy(update={"reward": None})]
    ep = build_episode("run-1", task("t"), trajs, 2, ProcessorSettings(estimator="rloo"))
    assert ep.event_id == "ep:run-1/t" and ep.rewards == (0.0, 1.0)
    assert ep.advantages == (-1.0, 1.0) and ep.estimator == "rloo" and not ep.uniform_reward
