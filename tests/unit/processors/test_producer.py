"""Acks: a batch's delivery reports counted across threads, without a broker."""

from __future__ import annotations

import asyncio
import threading

import pytest
from confluent_kafka import KafkaError

from rllm.errors import KafkaError as RllmKafkaError
from rllm.kafka import Acks


class _Msg:
    def topic(self) -> str:
        return "t"


async def test_wait_returns_only_after_every_delivery_from_another_thread() -> None:
    acks = Acks(asyncio.get_running_loop())
    for _ in range(3):
        acks.add()
    acks.on_delivery(None, _Msg())  # one already delivered before the wait
    waiter = asyncio.ensure_future(acks.wait())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    thread = threading.Thread(target=lambda: [acks.on_delivery(None, _Msg()) for _ in range(2)])
    thread.start()
    await asyncio.wait_for(waiter, 5)
    thread.join()


async def test_nothing_sent_returns_at_once_and_a_failed_delivery_raises() -> None:
    await asyncio.wait_for(Acks(asyncio.get_running_loop()).wait(), 1)
    acks = Acks(asyncio.get_running_loop())
    acks.add()
    acks.add()
    threading.Thread(
        target=acks.on_delivery, args=(KafkaError(KafkaError._MSG_TIMED_OUT), _Msg())
    ).start()
    threading.Thread(target=acks.on_delivery, args=(None, _Msg())).start()
    with pytest.raises(RllmKafkaError, match="publishing to t"):
        await asyncio.wait_for(acks.wait(), 5)
