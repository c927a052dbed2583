"""One worker on the real broker: interleaved sessions across partitions, duplicates,
poison, late rewards, step-count mismatch, idle timeout with a late step, partial groups.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from rllm.schemas.delta import restore_steps
from rllm.schemas.topics import DEAD_LETTERS, EPISODES, TRAJECTORIES
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionStatus
from rllm.settings import KafkaSettings
from tests.integration.processors.helpers import (
    CODEC,
    Workers,
    count,
    publish,
    publish_raw,
    read_every_session_event,
    records,
    wait_until,
)
from tests.samples import DEAD
from tests.unit.processors.factory import T0, make_session, task


def _interleave(sessions: list[list[SessionEvent]]) -> list[SessionEvent]:
    return [e for batch in zip_longest(*sessions) for e in batch if e is not None]


def test_worker_handles_the_awkward_cases(
    kafka: KafkaSettings, make_topics: Any, workers: Workers
) -> None:
    make_topics(partitions=3)
    grouped = [
        make_session(
            f"g{t}-{r}",
            the_task=task(f"t{t}", answer="56"),
            rollout_index=r,
            group_size=4,
            answer="56" if r < t + 1 else "55",
        )
        for t in range(3)
        for r in range(4)
    ]
    no_fn = task("nofn", reward_fn=None)
    late_reward = make_session("late-reward", the_task=no_fn)
    never_scored = make_session("never-scored", the_task=task("nofn2", reward_fn=None))
    mismatch = make_session("mismatch", the_task=task("mm"), reported_steps=5)
    abandoned = make_session("abandoned", the_task=task("ab"), num_steps=2, close=False)
    partial = [
        make_session(f"p{r}", the_task=task("part"), rollout_index=r, group_size=3)
        for r in range(2)
    ]
    worker = workers.start(idle_timeout_s=3, reward_wait_s=3, group_timeout_s=6)

    publish(kafka, _interleave(grouped))
    publish_raw(kafka, b"junk", b"\x00\x00\x00\x00\x07not avro")
    publish_raw(kafka, b"junk", b"plain text")
    publish_raw(kafka, b"dead", CODEC.encode(DEAD))  # valid Avro, wrong record type
    publish(kafka, _interleave(grouped)[::3])  # duplicates of events already sent
    publish(kafka, late_reward + never_scored + mismatch + abandoned + partial[0] + partial[1])
    # the reward comes after the worker has taken its session's SessionClosed
    wait_until(lambda: read_every_session_event(kafka), 60, "the worker to read every event")
    publish(
        kafka,
        [
            SessionEvent(
                event_id="late-reward/ext",
                session_id="late-reward",
                run_id="run-1",
                emitted_at=T0,
                producer="evaluator",
                payload=RewardAssigned(reward=0.75, evaluator="judge"),
            )
        ],
    )
    wait_until(
        lambda: count(kafka, TRAJECTORIES) >= 18, 60, f"18 trajectories\n{workers.log(0)[-3000:]}"
    )
    late_step = abandoned[2].model_copy(update={"event_id": "abandoned/late"})
    publish(kafka, [late_step])
    wait_until(
        lambda: count(kafka, EPISODES) >= 8 and count(kafka, DEAD_LETTERS) >= 5,
        40,
        "8 episodes and 5 dead letters",
    )
    wait_until(
        lambda: any(d.error_type == "LateEvent" for d in records(kafka, DEAD_LETTERS)),
        40,
        "the late step's LateEvent",
    )
    # it was taken as late in the transaction that would have sent a second trajectory on
    abandoned_scored = [
        t.session_id
        for t in records(kafka, "rllm-processors-scoring")
        if t.session_id == "abandoned"
    ]
    assert abandoned_scored == ["abandoned"]
    assert workers.stop(worker) == 0

    trajs = {t.session_id: t for t in records(kafka, TRAJECTORIES)}
    assert len(records(kafka, TRAJECTORIES)) == 18 == len(trajs)  # no duplicates at all
    assert [trajs[f"g1-{r}"].reward for r in range(4)] == [1.0, 1.0, 0.0, 0.0]
    assert trajs["late-reward"].reward == 0.75 and trajs["late-reward"].evaluator == "judge"
    assert trajs["never-scored"].reward is None
    assert "reward_wait_s=3" in (trajs["never-scored"].reward_error or "")
    assert trajs["mismatch"].flags == ("step_count_mismatch",)
    assert trajs["abandoned"].status == SessionStatus.TIMEOUT
    assert trajs["abandoned"].flags == ("idle_timeout",) and len(trajs["abandoned"].steps) == 2
    carried = trajs["g0-0"].steps
    assert [s.prompt_prefix_len for s in carried] == [0, 7, 13]  # each token carried once
    steps, restore_flags = restore_steps(carried)
    assert [s.step_index for s in steps] == [0, 1, 2] and restore_flags == []
    assert steps[2].prompt_ids.tolist() == [
        1,
        2,
        3,
        1000,
        1001,
        1002,
        1003,
        501,
        601,
        2000,
        2001,
        2002,
        2003,
        502,
        602,
    ]

    eps = {e.task.task_id: e for e in records(kafka, EPISODES)}
    assert len(eps) == 8 and len(records(kafka, EPISODES)) == 8
    assert eps["t0"].rewards == (1.0, 0.0, 0.0, 0.0) and not eps["t0"].uniform_reward
    assert eps["t0"].advantages[0] > 0 > eps["t0"].advantages[1]
    assert eps["part"].is_partial and len(eps["part"].trajectories) == 2
    assert eps["nofn2"].rewards == (0.0,) and eps["nofn2"].uniform_reward

    letters = records(kafka, DEAD_LETTERS)
    kinds = sorted(d.error_type for d in letters)
    assert kinds == [
        "DecodeError",
        "LateEvent",
        "StepCountMismatch",
        "UnknownSchemaError",
        "ValueError",
    ], [(d.error_type, d.reason) for d in letters]
    wrong_type = next(d for d in letters if d.error_type == "ValueError")
    assert "DeadLetter" in wrong_type.reason and wrong_type.source_offset >= 0
    late = next(d for d in letters if d.error_type == "LateEvent")
    assert "abandoned" in late.reason and "idle_timeout" in late.reason
