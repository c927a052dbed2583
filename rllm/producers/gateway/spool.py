"""Append-only local spool for events Kafka could not take, drained in order later.

File ``events.spool`` holds frames ``<I topic_len><I key_len or 0xFFFFFFFF><I value_len>``
followed by the bytes; ``events.cursor`` holds the byte offset up to which Kafka has
acknowledged. A torn frame at the end (crash mid-write) is cut off on open.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Spool", "SpooledEvent"]

_HEAD = struct.Struct("<III")
_NO_KEY = 0xFFFFFFFF


@dataclass(frozen=True)
class SpooledEvent:
    """One spooled event and the file offset just after it."""

    end: int
    topic: str
    key: bytes | None
    value: bytes


class Spool:
    """The write-ahead file; thread-safe."""

    def __init__(self, directory: Path, fsync: bool = True) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "events.spool"
        self._cursor_path = directory / "events.cursor"
        self._fsync = fsync
        self._lock = threading.Lock()
        self._cursor = self._read_cursor()
        self._file = open(self.path, "a+b")  # noqa: SIM115 - held open for appends
        self._depth = 0
        end = self._scan()
        if end != self._file.seek(0, os.SEEK_END):
            self._file.truncate(end)
        self._file.seek(0, os.SEEK_END)

    def _read_cursor(self) -> int:
        try:
            return int(self._cursor_path.read_text() or 0)
        except FileNotFoundError:
            return 0

    def _scan(self) -> int:
        """Count whole frames after the cursor; return where the last whole frame ends."""
        pos = self._cursor
        for event in self._iter(pos, None):
            self._depth += 1
            pos = event.end
        return pos

    def _iter(self, pos: int, limit: int | None) -> list[SpooledEvent]:
        out: list[SpooledEvent] = []
        with open(self.path, "rb") as f:
            f.seek(pos)
            while limit is None or len(out) < limit:
                head = f.read(_HEAD.size)
                if len(head) < _HEAD.size:
                    break
                tlen, klen, vlen = _HEAD.unpack(head)
                body = f.read(tlen + (0 if klen == _NO_KEY else klen) + vlen)
                if len(body) < tlen + (0 if klen == _NO_KEY else klen) + vlen:
                    break
                topic = body[:tlen].decode("utf-8")
                key = None if klen == _NO_KEY else body[tlen : tlen + klen]
                value = body[len(body) - vlen :]
                pos += _HEAD.size + len(body)
                out.append(SpooledEvent(pos, topic, key, value))
        return out

    @property
    def depth(self) -> int:
        """Events spooled and not yet acknowledged by Kafka."""
        return self._depth

    def append(self, topic: str, key: bytes | None, value: bytes) -> None:
        """Append one event durably (flushed, and fsynced if configured)."""
        t = topic.encode("utf-8")
        frame = _HEAD.pack(len(t), _NO_KEY if key is None else len(key), len(value))
        with self._lock:
            self._file.write(frame + t + (key or b"") + value)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
            self._depth += 1

    def read(self, limit: int = 500) -> list[SpooledEvent]:
        """Up to ``limit`` events from the cursor on, in order."""
        with self._lock:
            return self._iter(self._cursor, limit)

    def advance(self, event: SpooledEvent, count: int) -> None:
        """Mark events up to and including ``event`` (``count`` of them) as delivered."""
        with self._lock:
            self._cursor = event.end
            self._depth -= count
            tmp = self._cursor_path.with_suffix(".tmp")
            tmp.write_text(str(self._cursor))
            os.replace(tmp, self._cursor_path)

    def reset_if_empty(self) -> bool:
        """Truncate the file when everything is delivered; return whether it was empty."""
        with self._lock:
            if self._depth:
                return False
            self._file.truncate(0)
            self._file.seek(0)
            self._cursor = 0
            self._cursor_path.unlink(missing_ok=True)
            return True

    def close(self) -> None:
        """Close the file."""
        self._file.close()
