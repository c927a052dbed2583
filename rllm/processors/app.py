"""The faust application: assemble -> score -> group, wired to Kafka topics and tables.

Agents only decode, call the books' pure-ish logic and publish. Delivery is faust's
``at_least_once`` with idempotent outputs: every output has a deterministic ``event_id``
(``traj:<session_id>``, ``ep:<run_id>/<task_id>``), state changes are idempotent by
``event_id``, and a consumer keeps the first record per ``event_id`` (see ``dedup``).

Throughput: agents take records in batches (``batch_max`` / ``batch_within_s``), stage
the batch's table writes, publish its outputs through librdkafka and await their acks
once, then write the changelog (also through librdkafka, to explicit partitions) and
await those acks before the batch's records are acknowledged to faust (committable).
Records stay Avro dicts end to end (no pydantic model per hop), and every hop (scoring
topic, rllm.trajectories, group members table, rllm.episodes) carries steps delta-encoded
(``rllm.schemas.delta``): a session's tokens and requests once.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faust

from rllm.kafka import ensure_topics, make_admin, make_codec
from rllm.processors.consumer import GuardedApp
from rllm.processors.deadletter import MessageView, refused
from rllm.processors.group import GroupBook
from rllm.processors.publish import Outputs, Sink
from rllm.processors.score import RewardRunner
from rllm.processors.sessions import SessionBook
from rllm.processors.settings import ProcessorSettings
from rllm.processors.staged import StagedStore
from rllm.processors.types import Emit, Output
from rllm.schemas.ids import group_key
from rllm.schemas.topics import (
    DEAD_LETTERS,
    EPISODES,
    SESSION_EVENTS,
    TRAJECTORIES,
    TopicSpec,
)
from rllm.schemas.types import SessionEvent, TrajectoryAssembled
from rllm.settings import KafkaSettings, private_home

__all__ = ["TICK", "Processors", "Sink", "topic_partitions"]

log = logging.getLogger(__name__)

TICK = b"rllm-tick"
"""Value of a timer's tick message (internal topics only)."""


_RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}


def topic_partitions(kafka: KafkaSettings, full_name: str) -> int:
    """Partition count of an existing topic.

    Raises:
        rllm.errors.TopicError: when the topic does not exist.
    """
    from rllm.errors import TopicError

    meta = make_admin(kafka).list_topics(full_name, timeout=kafka.request_timeout_s)
    topic = meta.topics.get(full_name)
    if topic is None or topic.error is not None or not topic.partitions:
        raise TopicError(f"topic {full_name} does not exist; create it with `rllm-cli up`")
    return len(topic.partitions)


class Processors:
    """One faust app with the assemble, score and group agents, tables and timers.

    Args:
        settings: processor settings.
        kafka: where Kafka is; every topic name goes through ``kafka.topic()``.
        app_id: faust application id (consumer group, changelog and internal topics).
        partitions: ``(session-events, trajectories)`` partition counts; asked of the
            broker when None.
        sink: replaces publishing (unit tests with ``agent.test_context()``); table
            changes then go through faust's changelog producer.
    """

    def __init__(
        self,
        settings: ProcessorSettings,
        kafka: KafkaSettings,
        *,
        app_id: str,
        partitions: tuple[int, int] | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.settings, self.kafka = settings, kafka
        self.codec = make_codec(kafka)
        out = settings.output_prefix
        self.names = {
            "source": kafka.topic(SESSION_EVENTS),
            Output.TRAJECTORIES: kafka.topic(out + TRAJECTORIES),
            Output.EPISODES: kafka.topic(out + EPISODES),
            Output.DEAD_LETTERS: kafka.topic(out + DEAD_LETTERS),
            Output.SCORING: f"{app_id}-scoring",
            "session_ticks": f"{app_id}-session-ticks",
            "group_ticks": f"{app_id}-group-ticks",
        }
        if partitions is None:
            partitions = (
                topic_partitions(kafka, self.names["source"]),
                topic_partitions(kafka, self.names[Output.TRAJECTORIES]),
            )
        n_src, n_traj = partitions
        big = str(kafka.max_message_bytes + 65536)
        self.app = _faust_app(app_id, settings, kafka, n_src)
        app = self.app
        cfg = {"max.message.bytes": big}
        self.topics = {
            name: app.topic(self.names[name], **_RAW)
            for name in (Output.TRAJECTORIES, Output.EPISODES, Output.DEAD_LETTERS)
        }
        self.topics[Output.SCORING] = app.topic(
            self.names[Output.SCORING], internal=True, partitions=n_src, config=cfg, **_RAW
        )
        self.session_ticks = app.topic(
            self.names["session_ticks"], internal=True, partitions=n_src, **_RAW
        )
        self.group_ticks = app.topic(
            self.names["group_ticks"], internal=True, partitions=n_traj, **_RAW
        )
        tables = _tables(app, n_src, n_traj, cfg)
        self.tables = tables
        staged = {name: StagedStore(table) for name, table in tables.items()}
        self.session_stores = (staged["session-headers"], staged["session-events"])
        self.group_stores = (staged["group-headers"], staged["group-members"])
        self.sessions = SessionBook(
            settings, *self.session_stores, self.codec, self.names["source"]
        )
        self.groups = GroupBook(
            settings, *self.group_stores, self.codec, self.names[Output.TRAJECTORIES]
        )
        self.internal = {
            self.names[Output.SCORING]: n_src,
            self.names["session_ticks"]: n_src,
            self.names["group_ticks"]: n_traj,
        }
        self.runner = RewardRunner(settings.reward_concurrency, settings.reward_timeout_s)
        self.outputs = Outputs(settings, kafka, self.codec, self.names, sink)
        self.last_activity = time.monotonic()
        self._build_agents()

    def declare_internal_topics(self) -> list[str]:
        """Create the internal scoring and tick topics before the worker subscribes."""
        bare = self.kafka.model_copy(update={"topic_prefix": ""})
        specs = [
            TopicSpec(
                name,
                "internal",
                "session_id or run_id/task_id",
                partitions=n,
                config={
                    "max.message.bytes": str(self.kafka.max_message_bytes + 65536),
                    "retention.ms": str(7 * 24 * 3600 * 1000),
                },
            )
            for name, n in self.internal.items()
        ]
        return ensure_topics(bare, specs)

    # publishing ----------------------------------------------------------------------

    async def emit(self, emits: list[Emit]) -> None:
        """Encode and publish; see ``Outputs.emit``."""
        await self.outputs.emit(emits)

    async def emit_then_apply(self, emits: list[Emit], stores: tuple[StagedStore, ...]) -> None:
        """Publish, then apply the state; see ``Outputs.emit_then_apply``."""
        await self.outputs.emit_then_apply(emits, stores)

    def close(self) -> None:
        """Flush and stop the producers and the reward threads; a replay's own data
        directory (its app id is unique) goes too."""
        self.outputs.close()
        self.runner.close()
        if self.settings.replay:
            shutil.rmtree(self.app.conf.datadir, ignore_errors=True)

    # agents --------------------------------------------------------------------------

    def _build_agents(self) -> None:
        app, s = self.app, self.settings
        source = app.topic(self.names["source"], self.names["session_ticks"], **_RAW)
        traj_in = app.topic(self.names[Output.TRAJECTORIES], self.names["group_ticks"], **_RAW)
        size, within = s.batch_max, s.batch_within_s

        @app.agent(source, name="assemble")
        async def assemble(stream: faust.StreamT[bytes]) -> None:
            async for events in stream.take_events(size, within):  # type: ignore[attr-defined]  # faust's CollectionT/StreamT stubs lack it
                emits = [e for ev in events for e in self.on_session_message(_view(ev.message))]
                await self.emit_then_apply(emits, self.session_stores)

        @app.agent(self.topics[Output.SCORING], name="score")
        async def score(stream: faust.StreamT[bytes]) -> None:
            async for values in stream.take(size, within):
                done = await asyncio.gather(*(self.on_scoring(v) for v in values))
                await self.emit([e for emits in done for e in emits])

        @app.agent(traj_in, name="group")
        async def group(stream: faust.StreamT[bytes]) -> None:
            async for events in stream.take_events(size, within):  # type: ignore[attr-defined]  # faust's CollectionT/StreamT stubs lack it
                emits = [e for ev in events for e in self.on_trajectory_message(_view(ev.message))]
                await self.emit_then_apply(emits, self.group_stores)

        @app.timer(s.tick_interval_s)  # type: ignore[untyped-decorator]  # faust: untyped
        async def tick() -> None:
            try:
                await self.send_ticks(time.time())
            except Exception as exc:  # broker away: the due keys are due again next time
                log.warning("ticks not sent (%r); trying again in %.1f s", exc, s.tick_interval_s)

        self.assemble, self.score, self.group, self.tick = assemble, score, group, tick

    def on_session_message(self, view: MessageView) -> list[Emit]:
        """Handle one record of rllm.session-events (or a session tick)."""
        return self._on_record(
            view, self.session_stores, self.sessions.on_tick, self._on_session_event, "assemble"
        )

    def _on_session_event(self, view: MessageView) -> list[Emit]:
        name, event = self.codec.decode_dict(view.value_ or b"")
        if name != SessionEvent.avro_name:
            raise ValueError(
                f"expected a SessionEvent on {view.topic_}, got {name.rpartition('.')[2]}"
            )
        if view.key_ is not None and view.key_ != event["session_id"].encode():
            raise ValueError(
                f"key {view.key_!r} is not the event's session_id "
                f"{event['session_id']!r}; events of a session must share it"
            )
        return self.sessions.on_event_dict(
            event, view.value_ or b"", view.partition_, view.offset_, time.time()
        )

    async def on_scoring(self, value: bytes) -> list[Emit]:
        """Score one assembled trajectory and route it to rllm.trajectories (Avro dicts
        all the way: no pydantic model per hop; its steps stay delta-encoded)."""
        name, traj = self.codec.decode_dict(value)
        if name != TrajectoryAssembled.avro_name:
            raise ValueError(f"expected a TrajectoryAssembled on the scoring topic, got {name}")
        await self.runner.score_dict(traj)
        key = group_key(traj["run_id"], traj["task"]["task_id"]).encode()
        return [
            Emit(
                Output.TRAJECTORIES,
                key,
                value=self.codec.encode_dict(
                    TrajectoryAssembled.avro_name, traj, topic=self.names[Output.TRAJECTORIES]
                ),
            )
        ]

    def on_trajectory_message(self, view: MessageView) -> list[Emit]:
        """Handle one record of rllm.trajectories (or a group tick)."""
        return self._on_record(
            view, self.group_stores, self.groups.on_tick, self._on_trajectory, "group"
        )

    def _on_trajectory(self, view: MessageView) -> list[Emit]:
        name, traj = self.codec.decode_dict(view.value_ or b"")
        if name != TrajectoryAssembled.avro_name:
            raise ValueError(f"expected a TrajectoryAssembled, got {name}")
        return self.groups.on_trajectory_dict(
            traj, view.value_ or b"", view.partition_, view.offset_, time.time()
        )

    def _on_record(
        self,
        view: MessageView,
        stores: tuple[StagedStore, ...],
        on_tick: Callable[[str, float], list[Emit]],
        handle: Callable[[MessageView], list[Emit]],
        stage: str,
    ) -> list[Emit]:
        """What both books' handlers share: ``stores`` write to the record's partition; a
        tick goes to ``on_tick``, a record to ``handle``; a record it refuses (any error)
        rolls ``stores`` back and goes to the dead letters as refused at ``stage``."""
        self.last_activity = time.monotonic()
        marks = [_enter(store, view.partition_) for store in stores]
        if view.value_ == TICK:
            return on_tick((view.key_ or b"").decode(), time.time())
        try:
            return handle(view)
        except Exception as exc:  # any refused record goes to the dead letters
            for store, mark in zip(stores, marks, strict=True):
                store.rollback(mark)
            return [refused(view, exc, stage)]

    # timers --------------------------------------------------------------------------

    async def send_ticks(self, now: float) -> int:
        """Send a tick to every due session and group, on its own partition."""
        sent = 0
        for book, topic in ((self.sessions, self.session_ticks), (self.groups, self.group_ticks)):
            for key, partition in book.due_keys(now):
                await topic.send(key=key.encode(), value=TICK, partition=partition, force=True)
                sent += 1
        if sent:
            await asyncio.sleep(0)
        return sent


def _data_dir(app_id: str) -> Path:
    """faust's data directory for ``app_id`` under ``$RLLM_HOME/processors`` (made here:
    faust makes only the last level)."""
    parent = private_home() / "processors"
    parent.mkdir(exist_ok=True)
    return parent / app_id


def _enter(store: StagedStore, partition: int) -> int:
    """Point a store's writes at a record's partition; its savepoint for a rollback."""
    store.partition = partition
    return store.mark()


def _view(message: Any) -> MessageView:
    return MessageView(message.topic, message.partition, message.offset, message.key, message.value)


def _faust_app(
    app_id: str, settings: ProcessorSettings, kafka: KafkaSettings, n_src: int
) -> GuardedApp:
    """The worker's faust app: memory tables restored from their changelogs, at-least-once
    processing, big enough messages, acks from every replica."""
    return GuardedApp(
        app_id,
        broker=f"kafka://{kafka.bootstrap_servers}",
        store="memory://",
        # faust's data directory (empty with memory tables: their state is in the
        # changelogs) under $RLLM_HOME, not ./<app_id>-data in the working directory
        datadir=str(_data_dir(app_id)),
        processing_guarantee="at_least_once",
        autodiscover=False,
        web_enabled=False,
        topic_replication_factor=kafka.replication_factor,
        topic_partitions=n_src,
        consumer_auto_offset_reset="earliest" if settings.from_beginning else "latest",
        broker_commit_interval=settings.commit_interval_s,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
        producer_max_request_size=kafka.max_message_bytes + 65536,
        consumer_max_fetch_size=kafka.max_message_bytes + 65536,
        producer_acks=-1,
        table_cleanup_interval=3600.0,
        # No standby replicas: a partition that turns from standby to active on the same
        # worker (a worker left) hung in faust's recovery ("Still fetching changelog
        # topics", have offset -1) and the worker stopped processing; a partition that
        # moves is restored from its changelog instead.
        table_standby_replicas=0,
        # batch produce requests: without linger each record is its own acks=all round trip
        producer_linger=settings.linger_s,
        producer_max_batch_size=1024 * 1024,
    )


def _tables(app: GuardedApp, n_src: int, n_traj: int, cfg: dict[str, str]) -> dict[str, Any]:
    """The worker's four tables, keyed and valued by raw bytes (our own codecs)."""
    tables = {
        name: app.Table(
            name,
            default=None,
            partitions=n,
            extra_topic_configs=cfg,
            key_type=bytes,
            value_type=bytes,
        )
        for name, n in (
            ("session-headers", n_src),
            ("session-events", n_src),
            ("group-headers", n_traj),
            ("group-members", n_traj),
        )
    }
    for table in tables.values():  # raw bytes in and out: our own codecs, not faust's
        table.key_serializer = table.value_serializer = "raw"  # type: ignore[attr-defined]  # faust's CollectionT stubs lack it
    return tables
