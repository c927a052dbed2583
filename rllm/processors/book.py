"""What the processors' two books (``SessionBook``, ``GroupBook``) share: keyed state over a
faust table of JSON headers, and an index of when each key next needs a timer tick."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import MutableMapping
from typing import Generic, TypeVar

from rllm.processors.deadlines import DeadlineIndex
from rllm.processors.settings import ProcessorSettings
from rllm.processors.types import GroupHeader, SessionHeader
from rllm.schemas.codec import AvroCodec

__all__ = ["Book", "Store"]

Store = MutableMapping[bytes, bytes]
H = TypeVar("H", SessionHeader, GroupHeader)


class Book(ABC, Generic[H]):
    """A header per key in ``headers`` and a ``DeadlineIndex`` over them; a book says which
    header it keeps (``header_type``), the header's key and when the key is next due."""

    header_type: type[H]

    def __init__(
        self, settings: ProcessorSettings, headers: Store, codec: AvroCodec, source_topic: str
    ) -> None:
        self.settings = settings
        self.headers = headers
        self.codec = codec
        self.source_topic = source_topic
        self.index = DeadlineIndex(
            headers, self._due_of, retick_s=max(5 * settings.tick_interval_s, 2.0)
        )

    def _due_of(self, raw: bytes) -> tuple[float, int]:
        h = self.header_type.model_validate_json(raw)
        return self.next_due(h), h.partition

    @abstractmethod
    def next_due(self, h: H) -> float:
        """Wall time at which a tick would change ``h``'s key."""

    @abstractmethod
    def key_of(self, h: H) -> str:
        """The key ``h`` is stored under."""

    def due_keys(self, now: float) -> list[tuple[str, int]]:
        """Keys a timer should tick now, with their partitions."""
        return list(self.index.due(now))

    def header(self, key: str) -> H | None:
        """The stored header of ``key``."""
        raw = self.headers.get(key.encode())
        return None if raw is None else self.header_type.model_validate_json(raw)

    def _save(self, h: H) -> None:
        key = self.key_of(h)
        self.headers[key.encode()] = h.model_dump_json().encode()
        self.index.set(key, self.next_due(h), h.partition)
