"""Staged table writes: a book's state changes are held until its outputs are acknowledged.

Why: state and outputs are not written atomically (faust's exactly-once is not used). If
the "trajectory emitted" state reached the changelog before the trajectory reached its
topic, a crash in between would lose the trajectory for good. Applying state only after
the outputs' acks turns that window into a possible duplicate (same ``event_id``, same
content), which consumers drop.

Batches: a batch of records stages its writes here; ``mark``/``rollback`` undo one
refused record's writes without losing the rest. Several writes to one key within a
batch reach the changelog once (the last one). Writes go to the changelog partition
given by ``partition`` at the time of the write (the partition of the record being
handled), since a batch spans partitions and faust's ``current_event`` does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

__all__ = ["ChangelogSend", "StagedStore"]

ChangelogSend = Callable[[int, bytes, "bytes | None"], None]
"""Writes one changelog record: ``(partition, key, value)``, None value = tombstone."""

_DELETED = object()
_ABSENT = object()


class StagedStore(MutableMapping[bytes, bytes]):
    """A write overlay on a table: reads see staged writes; ``apply`` makes them real."""

    def __init__(self, table: MutableMapping[bytes, bytes]) -> None:
        self.table = table
        self.partition: int | None = None
        """Changelog partition of the writes made now (set per record by the app)."""
        self._staged: dict[bytes, tuple[object, int | None]] = {}
        self._undo: list[tuple[bytes, object]] = []

    def __getitem__(self, key: bytes) -> bytes:
        entry = self._staged.get(key)
        if entry is not None:
            if entry[0] is _DELETED:
                raise KeyError(key)
            assert isinstance(entry[0], bytes)
            return entry[0]
        found = self.table.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def _stage(self, key: bytes, value: object) -> None:
        self._undo.append((key, self._staged.get(key, _ABSENT)))
        self._staged[key] = (value, self.partition)

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._stage(key, value)

    def __delitem__(self, key: bytes) -> None:
        if key not in self:
            raise KeyError(key)
        self._stage(key, _DELETED)

    def __contains__(self, key: object) -> bool:
        entry = self._staged.get(key) if isinstance(key, bytes) else None
        if entry is not None:
            return entry[0] is not _DELETED
        return self.table.get(key) is not None  # type: ignore[call-overload]  # faust Table.get is typed for its key type, not object

    def __iter__(self) -> Iterator[bytes]:
        seen = set()
        for key, (value, _) in self._staged.items():
            seen.add(key)
            if value is not _DELETED:
                yield key
        for key in list(self.table.keys()):
            if key not in seen and self.table.get(key) is not None:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @property
    def pending(self) -> int:
        """Keys with writes or deletes not applied yet."""
        return len(self._staged)

    def mark(self) -> int:
        """A savepoint for ``rollback`` (before handling one record of a batch)."""
        return len(self._undo)

    def rollback(self, mark: int) -> None:
        """Undo the writes staged since ``mark``, keeping earlier ones."""
        while len(self._undo) > mark:
            key, previous = self._undo.pop()
            if previous is _ABSENT:
                self._staged.pop(key, None)
            else:
                self._staged[key] = previous  # type: ignore[assignment]  # the undo log holds _ABSENT or an entry

    def apply(self, send: ChangelogSend | None = None) -> None:
        """Write the staged changes to the table and its changelog.

        Args:
            send: ``(partition, key, value or None)`` writes one changelog record (the
                worker's own producer); default: the faust table's ``send_changelog``.
        """
        if send is None and hasattr(self.table, "send_changelog"):
            send = _faust_send(self.table)
        data: Any = getattr(self.table, "data", self.table) if send is not None else None
        for key, (value, partition) in self._staged.items():
            if send is not None and partition is not None:
                if value is _DELETED:
                    if data.get(key) is not None:
                        send(partition, key, None)
                        del data[key]
                else:
                    assert isinstance(value, bytes)
                    send(partition, key, value)
                    data[key] = value
            elif value is _DELETED:
                if self.table.get(key) is not None:
                    del self.table[key]
            else:
                assert isinstance(value, bytes)
                self.table[key] = value
        self._staged.clear()
        self._undo.clear()

    def discard(self) -> None:
        """Drop all staged changes (the outputs could not be published)."""
        self._staged.clear()
        self._undo.clear()


def _faust_send(table: Any) -> ChangelogSend:
    """A changelog writer through faust's producer, to an explicit partition."""

    def send(partition: int, key: bytes, value: bytes | None) -> None:
        if value is None:
            table.send_changelog(partition, key, None, value_serializer="raw")
        else:
            table.send_changelog(partition, key, value)

    return send
