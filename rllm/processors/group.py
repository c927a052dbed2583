"""Grouping: scored trajectories of one (run_id, task_id) -> one EpisodeAssembled.

A group completes when ``group_size`` distinct sessions arrived, or, after
``group_timeout_s``, goes out partial (``is_partial``). A trajectory without a reward
counts as reward 0.0 (its ``reward_error`` stays visible inside the episode). A
trajectory arriving after its episode went out is reported to the dead letters.
Trajectories are stored and emitted delta-encoded (``rllm.schemas.delta``): an episode's
bytes grow with its sessions' tokens, not with their steps times their contexts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rllm.errors import ConfigError
from rllm.processors.advantages import compute_advantages, is_uniform
from rllm.processors.book import Book, Store
from rllm.processors.deadletter import report
from rllm.processors.settings import ProcessorSettings
from rllm.processors.types import Emit, GroupHeader, Output
from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import from_avro, to_avro
from rllm.schemas.delta import encode_step_dicts
from rllm.schemas.ids import episode_id, group_key
from rllm.schemas.run import RUN_ESTIMATOR_KEY, run_estimator
from rllm.schemas.types import EpisodeAssembled, Estimator, Task, TrajectoryAssembled, utcnow

__all__ = [
    "GroupBook",
    "GroupStats",
    "build_episode",
    "episode_dict",
    "episode_estimator",
]


def episode_estimator(
    run_id: str, task_metadata_json: str, settings: ProcessorSettings
) -> Estimator:
    """The run's estimator as its task names it (``RUN_ESTIMATOR_KEY``), else the setting.

    Raises:
        ConfigError: if the task names an estimator that is not an ``Estimator``.
    """
    try:
        named = run_estimator(task_metadata_json)
    except ValueError as exc:
        raise ConfigError(f"run {run_id!r}: {exc}") from exc
    if named is None:
        return settings.estimator
    if named not in set(Estimator):
        raise ConfigError(
            f"run {run_id!r} asks for advantage estimator {named!r} (task metadata "
            f"{RUN_ESTIMATOR_KEY!r}); use one of {', '.join(Estimator)}"
        )
    return Estimator(named)


def build_episode(
    run_id: str,
    task: Task,
    trajectories: Sequence[TrajectoryAssembled],
    group_size: int,
    settings: ProcessorSettings,
    *,
    partial: bool = False,
) -> EpisodeAssembled:
    """The episode of one group, trajectories in ``rollout_index`` order: ``episode_dict``,
    the one the worker runs, for callers holding models."""
    episode = episode_dict(
        run_id,
        [to_avro(t) for t in trajectories],
        group_size,
        settings,
        partial=partial,
        task=to_avro(task),
    )
    result: EpisodeAssembled = from_avro(EpisodeAssembled.avro_name, episode)
    return result


@dataclass
class GroupStats:
    """Counters of what the book did."""

    accepted: int = 0
    duplicates: int = 0
    late: int = 0
    episodes: int = 0
    partial: int = 0


def _member_key(gkey: str, session_id: str) -> bytes:
    return f"{gkey}\x00{session_id}".encode()


class GroupBook(Book[GroupHeader]):
    """Collects trajectories per group and emits episodes (a "book": keyed state over a
    faust table, as ``SessionBook``)."""

    header_type = GroupHeader

    def __init__(
        self,
        settings: ProcessorSettings,
        headers: Store,
        members: Store,
        codec: AvroCodec,
        source_topic: str,
    ) -> None:
        super().__init__(settings, headers, codec, source_topic)
        self.members = members
        self.stats = GroupStats()

    def next_due(self, h: GroupHeader) -> float:
        """Wall time at which a tick would change this group."""
        if not h.done:
            return h.first_at + self.settings.group_timeout_s
        return (h.done_at or 0.0) + self.settings.closed_retention_s

    def key_of(self, h: GroupHeader) -> str:
        """The header's key."""
        return group_key(h.run_id, h.task_id)

    def on_trajectory(
        self, traj: TrajectoryAssembled, raw: bytes, partition: int, offset: int, now: float
    ) -> list[Emit]:
        """Accept one scored trajectory (``raw`` is its value as it came)."""
        return self.on_trajectory_dict(to_avro(traj), raw, partition, offset, now)

    def on_trajectory_dict(
        self, traj: dict[str, Any], raw: bytes, partition: int, offset: int, now: float
    ) -> list[Emit]:
        """``on_trajectory`` on the Avro-shaped dict (the fast path; ``traj`` is consumed:
        its steps are delta-encoded in place, which changes nothing on a trajectory from
        this version's assembler and makes an older full-prompt one small)."""
        run_id, task_id, session_id = traj["run_id"], traj["task"]["task_id"], traj["session_id"]
        gkey = group_key(run_id, task_id)
        h = self.header(gkey) or GroupHeader(
            run_id=run_id,
            task_id=task_id,
            partition=partition,
            group_size=traj["group_size"],
            first_at=now,
        )
        member = _member_key(gkey, session_id)
        known = session_id in h.session_ids
        if known and (h.done or member in self.members):
            self.stats.duplicates += 1
            return []
        # Known but without its member: a crash fell between the headers' and the members'
        # changelog writes, and the trajectory is redelivered; store it again.
        if not known:
            h.session_ids.append(session_id)
        if h.done:
            self.stats.late += 1
            self._save(h)
            return [
                report(
                    self.source_topic,
                    partition,
                    offset,
                    gkey.encode(),
                    raw,
                    f"late trajectory {session_id} for group {gkey}: its episode "
                    "was already emitted (partial, after group_timeout_s); not merged",
                    "LateTrajectory",
                    stage="group",
                )
            ]
        self.stats.accepted += 1
        encode_step_dicts(traj["steps"])  # the changelog and the episode carry the small form
        self.members[member] = self.codec.encode_dict(TrajectoryAssembled.avro_name, traj)
        h.group_size = max(h.group_size, traj["group_size"])
        if len(h.session_ids) >= h.group_size and self._all_members(gkey, h):
            return self._finish(h, now, partial=False)
        self._save(h)
        return []

    def _all_members(self, gkey: str, h: GroupHeader) -> bool:
        """Whether every session the header counts has its member stored (after a crash
        some may be missing until their trajectories are redelivered)."""
        return all(_member_key(gkey, sid) in self.members for sid in h.session_ids)

    def due(self, h: GroupHeader, now: float) -> bool:
        """Whether a timer tick would change this group now."""
        return now >= self.next_due(h)

    def on_tick(self, gkey: str, now: float) -> list[Emit]:
        """Emit a stale group as partial, or forget a finished one after the retention."""
        h = self.header(gkey)
        if h is None or not self.due(h, now):
            return []
        if not h.done:
            return self._finish(h, now, partial=True)
        del self.headers[gkey.encode()]
        self.index.drop(gkey)
        return []

    def _finish(self, h: GroupHeader, now: float, *, partial: bool) -> list[Emit]:
        gkey = group_key(h.run_id, h.task_id)
        keys = [_member_key(gkey, sid) for sid in h.session_ids]
        raws = [self.members.get(k) for k in keys]
        trajs = [self.codec.decode_dict(r)[1] for r in raws if r is not None]
        for key in keys:
            if key in self.members:
                del self.members[key]
        h.done, h.done_at = True, now
        self._save(h)
        if not trajs:
            return []
        self.stats.episodes += 1
        self.stats.partial += int(partial)
        try:
            episode = episode_dict(h.run_id, trajs, h.group_size, self.settings, partial=partial)
        except ConfigError as exc:
            return [
                report(
                    self.source_topic,
                    h.partition,
                    -1,
                    gkey.encode(),
                    b"",
                    f"group {gkey} not emitted: {exc}",
                    "UnknownEstimator",
                    stage="group",
                )
            ]
        return [
            Emit(
                Output.EPISODES,
                gkey.encode(),
                value=self.codec.encode_dict(EpisodeAssembled.avro_name, episode),
            )
        ]


def episode_dict(
    run_id: str,
    trajectories: Sequence[dict[str, Any]],
    group_size: int,
    settings: ProcessorSettings,
    *,
    partial: bool = False,
    task: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The episode of one group (Avro-shaped trajectory dicts, ``rollout_index`` order);
    ``task`` defaults to the first member's."""
    members = sorted(trajectories, key=lambda t: (t["rollout_index"], t["session_id"]))
    rewards_G = [0.0 if t["reward"] is None else float(t["reward"]) for t in members]
    task = task if task is not None else members[0]["task"]
    estimator = episode_estimator(run_id, task.get("metadata_json", "{}"), settings)
    advantages_G = compute_advantages(
        estimator,
        rewards_G,
        eps=settings.advantage_eps,
        scale_by_std=settings.scale_by_std,
        baseline=settings.reinforce_baseline,
    )
    return {
        "event_id": episode_id(run_id, task["task_id"]),
        "run_id": run_id,
        "task": task,
        "trajectories": members,
        "rewards": rewards_G,
        "advantages": [float(a) for a in advantages_G],
        "estimator": estimator.value,
        "group_size": group_size,
        "is_partial": partial,
        "uniform_reward": is_uniform(rewards_G),
        "assembled_at": utcnow(),
    }
