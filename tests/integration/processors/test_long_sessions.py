"""Long CLI-agent sessions on the real broker: a group of 8 sessions of 200 steps growing
to 100k tokens of context flows through the processors, every record on every topic
stays under the broker's limit, the trajectories' and episode's bytes grow with the
tokens (each carried once), and the trainer builds exactly the full-prompt sequences.
"""

from __future__ import annotations

from typing import Any

from rllm.consumers.trainer.batching import Batcher
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.kafka import EventPublisher, make_admin
from rllm.schemas.delta import full_prompts, full_requests
from rllm.schemas.topics import DEAD_LETTERS, EPISODES, SESSION_EVENTS, TRAJECTORIES
from rllm.schemas.types import EpisodeAssembled, TrajectoryAssembled
from rllm.settings import KafkaSettings
from tests.integration.helpers import each_record
from tests.integration.processors.helpers import CODEC, Workers, count, wait_until
from tests.unit.processors.factory import task
from tests.unit.processors.long_session import CliSession

GROUP, STEPS, CONTEXT, SYSTEM = 8, 200, 100_000, 20_000


def _sizes(kafka: KafkaSettings, full_topic: str) -> tuple[list[int], list[bytes]]:
    """The size of every record value of a topic, and the values themselves for the
    output topics (the session log and its changelog hold hundreds of MB: sizes only)."""
    sizes, values = [], []
    keep = full_topic.endswith((TRAJECTORIES, EPISODES, DEAD_LETTERS))
    for msg in each_record(kafka, full_topic, timeout_s=120):
        value = msg.value() or b""
        sizes.append(len(value))
        if keep:
            values.append(value)
    return sizes, values


def test_a_group_of_long_sessions_fits_and_trains_as_full_prompts(
    kafka: KafkaSettings, make_topics: Any, workers: Workers
) -> None:
    make_topics()
    the_task = task("long", answer="56")
    sessions = [
        CliSession(
            f"long-{r}",
            the_task,
            rollout_index=r,
            group_size=GROUP,
            steps=STEPS,
            context=CONTEXT,
            system_tokens=SYSTEM,
            answer="56" if r % 3 == 0 else "no",
            seed=r,
        )
        for r in range(GROUP)
    ]
    worker = workers.start()
    with EventPublisher(kafka) as pub:  # one session at a time: its requests are ~45 MB
        for session in sessions:
            for ev in session.events():
                pub.publish(SESSION_EVENTS, ev.session_id, ev)
            assert pub.flush(60) == 0
    wait_until(
        lambda: count(kafka, EPISODES) >= 1,
        300,
        lambda: f"the episode\n{workers.log(0)[-3000:]}",
    )
    assert workers.stop(worker) == 0

    prefix = kafka.topic_prefix
    names = sorted(
        n for n in make_admin(kafka).list_topics(timeout=10).topics if n.startswith(prefix)
    )
    assert any(n.endswith("-group-members-changelog") for n in names), names
    assert any(n.endswith("-scoring") for n in names), names
    read = {n: _sizes(kafka, n) for n in names}
    for name, (sizes, _) in read.items():
        assert max(sizes, default=0) < kafka.max_message_bytes, (name, max(sizes))
    assert len(read[kafka.topic(SESSION_EVENTS)][0]) == GROUP * (STEPS + 2)
    assert read[kafka.topic(DEAD_LETTERS)][0] == []

    traj_sizes, traj_values = read[kafka.topic(TRAJECTORIES)]
    (episode_size,), (episode_value,) = read[kafka.topic(EPISODES)]
    trajs: list[TrajectoryAssembled] = [CODEC.decode(v) for v in traj_values]
    assert sorted(t.session_id for t in trajs) == [s.session_id for s in sessions]
    assert all(t.flags == () and len(t.steps) == STEPS for t in trajs)
    tokens = sum(s.num_tokens for s in sessions)
    # each session's tokens (4 bytes, plus 4 per sampled token's logprob) and its
    # requests (~3.5 characters a token) once: about 9.5 bytes a token, never N^2
    assert sum(traj_sizes) < 11 * tokens, (sum(traj_sizes), tokens)
    assert episode_size < 1.01 * sum(traj_sizes), (episode_size, sum(traj_sizes))
    # restored, one trajectory alone would be far over the limit (the form this replaces)
    steps = trajs[0].steps
    full_bytes = sum(len(p or b"") for p in full_prompts(steps)) + sum(
        len(r or "") for r in full_requests(steps)
    )
    assert full_bytes > 4 * kafka.max_message_bytes, full_bytes

    episode: EpisodeAssembled = CODEC.decode(episode_value)
    assert [t.session_id for t in episode.trajectories] == [s.session_id for s in sessions]
    assert episode.rewards == tuple(1.0 if r % 3 == 0 else 0.0 for r in range(GROUP))
    batcher = Batcher(TrainerSettings(batch_size=1))
    assert batcher.add(episode, current_version=0), batcher.drops.messages
    batch = batcher.take()
    assert [q.session_id for q in batch.sequences] == [s.session_id for s in sessions]
    for seq, session, adv in zip(batch.sequences, sessions, episode.advantages, strict=True):
        ref = session.reference()
        assert seq.input_ids_T == ref.input_ids_T, session.session_id
        assert seq.loss_mask_T == ref.loss_mask_T, session.session_id
        assert seq.logprobs_T == ref.logprobs_T, session.session_id
        assert seq.step_ids == tuple(f"{session.session_id}/s{k}" for k in range(STEPS))
        assert seq.advantage == adv and len(seq.input_ids_T) == session.num_tokens
