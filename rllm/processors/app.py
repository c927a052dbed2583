"""The faust application: assemble -> score -> group, wired to Kafka topics and tables.

Agents only decode, call the books' pure-ish logic and publish. Delivery is faust's
``at_least_once`` with idempotent outputs: every output has a deterministic ``event_id``
(``traj:<session_id>``, ``ep:<run_id>/<task_id>``), state changes are idempotent by
``event_id``, and a consumer keeps the first record per ``event_id`` (see ``dedup``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import faust

from rllm.kafka import ensure_topics, make_admin, make_codec
from rllm.processors.deadletter import MessageView, refused, report
from rllm.processors.group import GroupBook
from rllm.processors.score import RewardRunner
from rllm.processors.sessions import SessionBook
from rllm.processors.settings import ProcessorSettings
from rllm.processors.staged import StagedStore
from rllm.processors.types import Emit, Output
from rllm.schemas.topics import (
    DEAD_LETTERS,
    EPISODES,
    SESSION_EVENTS,
    TRAJECTORIES,
    TopicSpec,
)
from rllm.schemas.types import SessionEvent, TrajectoryAssembled
from rllm.settings import KafkaSettings

__all__ = ["TICK", "Processors", "Sink", "topic_partitions"]

log = logging.getLogger(__name__)

TICK = b"rllm-tick"
"""Value of a timer's tick message (internal topics only)."""

Sink = Callable[[Output, bytes, bytes], Awaitable[None]]
"""Where encoded outputs go: ``(output, key, value)``, resolved once the record is durable
(acknowledged by Kafka in the worker)."""

_RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes,
                        "key_serializer": "raw", "value_serializer": "raw"}


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
        sink: replaces publishing (unit tests with ``agent.test_context()``).
    """

    def __init__(self, settings: ProcessorSettings, kafka: KafkaSettings, *, app_id: str,
                 partitions: tuple[int, int] | None = None, sink: Sink | None = None) -> None:
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
            partitions = (topic_partitions(kafka, self.names["source"]),
                          topic_partitions(kafka, self.names[Output.TRAJECTORIES]))
        n_src, n_traj = partitions
        big = str(kafka.max_message_bytes + 65536)
        self.app = faust.App(
            app_id, broker=f"kafka://{kafka.bootstrap_servers}", store="memory://",
            processing_guarantee="at_least_once", autodiscover=False, web_enabled=False,
            topic_replication_factor=1, topic_partitions=n_src,
            consumer_auto_offset_reset="earliest" if settings.from_beginning else "latest",
            broker_commit_interval=settings.commit_interval_s,
            broker_session_timeout=settings.session_timeout_s,
            broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
            producer_max_request_size=kafka.max_message_bytes + 65536,
            consumer_max_fetch_size=kafka.max_message_bytes + 65536,
            producer_acks=-1, table_cleanup_interval=3600.0,
            # batch produce requests: without linger each record is its own acks=all round trip
            producer_linger=settings.linger_s, producer_max_batch_size=1024 * 1024,
        )
        app = self.app
        cfg = {"max.message.bytes": big}
        self.topics = {
            name: app.topic(self.names[name], **_RAW)
            for name in (Output.TRAJECTORIES, Output.EPISODES, Output.DEAD_LETTERS)
        }
        self.topics[Output.SCORING] = app.topic(self.names[Output.SCORING], internal=True,
                                                partitions=n_src, config=cfg, **_RAW)
        self.session_ticks = app.topic(self.names["session_ticks"], internal=True,
                                       partitions=n_src, **_RAW)
        self.group_ticks = app.topic(self.names["group_ticks"], internal=True,
                                     partitions=n_traj, **_RAW)
        tables = {
            name: app.Table(name, default=None, partitions=n, extra_topic_configs=cfg,
                            key_type=bytes, value_type=bytes)
            for name, n in (("session-headers", n_src), ("session-events", n_src),
                            ("group-headers", n_traj), ("group-members", n_traj))
        }
        for table in tables.values():  # raw bytes in and out: our own codecs, not faust's
            table.key_serializer = table.value_serializer = "raw"  # type: ignore[attr-defined]
        self.tables = tables
        staged = {name: StagedStore(table) for name, table in tables.items()}
        self.session_stores = (staged["session-headers"], staged["session-events"])
        self.group_stores = (staged["group-headers"], staged["group-members"])
        self.sessions = SessionBook(settings, *self.session_stores, self.codec,
                                    self.names["source"])
        self.groups = GroupBook(settings, *self.group_stores, self.codec,
                                self.names[Output.TRAJECTORIES])
        self.internal = {self.names[Output.SCORING]: n_src, self.names["session_ticks"]: n_src,
                         self.names["group_ticks"]: n_traj}
        self.runner = RewardRunner(settings.reward_concurrency, settings.reward_timeout_s)
        self.sink: Sink = sink or self._publish
        self.last_activity = time.monotonic()
        self._build_agents()

    def declare_internal_topics(self) -> list[str]:
        """Create the internal scoring and tick topics before the worker subscribes."""
        bare = self.kafka.model_copy(update={"topic_prefix": ""})
        specs = [TopicSpec(name, "internal", "session_id or run_id/task_id", partitions=n,
                           config={"max.message.bytes": str(self.kafka.max_message_bytes + 65536),
                                   "retention.ms": str(7 * 24 * 3600 * 1000)})
                 for name, n in self.internal.items()]
        return ensure_topics(bare, specs)

    # publishing ----------------------------------------------------------------------

    async def _publish(self, output: Output, key: bytes, value: bytes) -> None:
        pending = await self.topics[output].send(key=key, value=value, force=True)
        await pending  # the broker's ack (acks=all)

    async def emit_then_apply(self, emits: list[Emit], stores: tuple[StagedStore, ...]) -> None:
        """Publish outputs and wait for their acks, then apply the state that says they went
        out; a crash in between yields a duplicate (same event_id), never a lost record."""
        try:
            await self.emit(emits)
        except BaseException:
            for store in stores:
                store.discard()
            raise
        for store in stores:
            store.apply()

    async def emit(self, emits: list[Emit]) -> None:
        """Encode and publish; a record over the size limit becomes a dead letter."""
        for e in emits:
            value = self.codec.encode(e.record, topic=self.names[e.output])
            if len(value) > self.kafka.max_message_bytes and e.output != Output.DEAD_LETTERS:
                reason = (f"{type(e.record).__name__} {getattr(e.record, 'event_id', '')} is "
                          f"{len(value)} bytes, over max_message_bytes="
                          f"{self.kafka.max_message_bytes}; refused, not truncated")
                letter = report(self.names[e.output], -1, -1, e.key, b"", reason,
                                "MessageTooLargeError", stage=e.output.value)
                await self.emit([letter])
                continue
            await self.sink(e.output, e.key, value)

    # agents --------------------------------------------------------------------------

    def _build_agents(self) -> None:
        app, s = self.app, self.settings
        source = app.topic(self.names["source"], self.names["session_ticks"], **_RAW)
        traj_in = app.topic(self.names[Output.TRAJECTORIES], self.names["group_ticks"], **_RAW)

        @app.agent(source, name="assemble")
        async def assemble(stream: faust.StreamT[bytes]) -> None:
            async for event in stream.events():
                emits = self.on_session_message(_view(event.message))
                await self.emit_then_apply(emits, self.session_stores)

        @app.agent(self.topics[Output.SCORING], name="score", concurrency=s.reward_concurrency)
        async def score(stream: faust.StreamT[bytes]) -> None:
            async for value in stream:
                await self.emit(await self.on_scoring(value))

        @app.agent(traj_in, name="group")
        async def group(stream: faust.StreamT[bytes]) -> None:
            async for event in stream.events():
                emits = self.on_trajectory_message(_view(event.message))
                await self.emit_then_apply(emits, self.group_stores)

        @app.timer(s.tick_interval_s)  # type: ignore[untyped-decorator]  # faust: untyped
        async def tick() -> None:
            await self.send_ticks(time.time())

        self.assemble, self.score, self.group, self.tick = assemble, score, group, tick

    def on_session_message(self, view: MessageView) -> list[Emit]:
        """Handle one record of rllm.session-events (or a session tick)."""
        self.last_activity = time.monotonic()
        if view.value_ == TICK:
            return self.sessions.on_tick((view.key_ or b"").decode(), time.time())
        try:
            event = self.codec.decode(view.value_ or b"")
            if not isinstance(event, SessionEvent):
                raise ValueError(f"expected a SessionEvent on {view.topic_}, got "
                                 f"{type(event).__name__}")
            if view.key_ is not None and view.key_ != event.session_id.encode():
                raise ValueError(f"key {view.key_!r} is not the event's session_id "
                                 f"{event.session_id!r}; events of a session must share it")
            return self.sessions.on_event(event, view.value_ or b"", view.partition_,
                                          view.offset_, time.time())
        except Exception as exc:  # any refused record goes to the dead letters
            for store in self.session_stores:
                store.discard()
            return [refused(view, exc, "assemble")]

    async def on_scoring(self, value: bytes) -> list[Emit]:
        """Score one assembled trajectory and route it to rllm.trajectories."""
        traj = self.codec.decode(value)
        assert isinstance(traj, TrajectoryAssembled)
        traj = await self.runner.score(traj)
        key = f"{traj.run_id}/{traj.task.task_id}".encode()
        return [Emit(Output.TRAJECTORIES, key, traj)]

    def on_trajectory_message(self, view: MessageView) -> list[Emit]:
        """Handle one record of rllm.trajectories (or a group tick)."""
        self.last_activity = time.monotonic()
        if view.value_ == TICK:
            return self.groups.on_tick((view.key_ or b"").decode(), time.time())
        try:
            traj = self.codec.decode(view.value_ or b"")
            if not isinstance(traj, TrajectoryAssembled):
                raise ValueError(f"expected a TrajectoryAssembled, got {type(traj).__name__}")
            return self.groups.on_trajectory(traj, view.value_ or b"", view.partition_,
                                             view.offset_, time.time())
        except Exception as exc:  # any refused record goes to the dead letters
            for store in self.group_stores:
                store.discard()
            return [refused(view, exc, "group")]

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


def _view(message: Any) -> MessageView:
    return MessageView(message.topic, message.partition, message.offset, message.key,
                       message.value)
