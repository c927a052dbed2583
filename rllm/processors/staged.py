"""Staged table writes: a book's state changes are held until its outputs are acknowledged.

Why: state and outputs are not written atomically (faust's exactly-once is not used). If
the "trajectory emitted" state reached the changelog before the trajectory reached its
topic, a crash in between would lose the trajectory for good. Applying state only after
the outputs' acks turns that window into a possible duplicate (same ``event_id``, same
content), which consumers drop.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

__all__ = ["StagedStore"]

_DELETED = object()


class StagedStore(MutableMapping[bytes, bytes]):
    """A write overlay on a table: reads see staged writes; ``apply`` makes them real."""

    def __init__(self, table: MutableMapping[bytes, bytes]) -> None:
        self.table = table
        self._staged: dict[bytes, object] = {}

    def __getitem__(self, key: bytes) -> bytes:
        value = self._staged.get(key, None)
        if value is _DELETED:
            raise KeyError(key)
        if value is not None:
            assert isinstance(value, bytes)
            return value
        found = self.table.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._staged[key] = value

    def __delitem__(self, key: bytes) -> None:
        if key not in self:
            raise KeyError(key)
        self._staged[key] = _DELETED

    def __contains__(self, key: object) -> bool:
        value = self._staged.get(key) if isinstance(key, bytes) else None
        if value is _DELETED:
            return False
        return value is not None or self.table.get(key) is not None  # type: ignore[call-overload]

    def __iter__(self) -> Iterator[bytes]:
        seen = set()
        for key, value in self._staged.items():
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
        """Writes and deletes not applied yet."""
        return len(self._staged)

    def apply(self) -> None:
        """Write the staged changes to the table (inside the stream event that made them)."""
        for key, value in self._staged.items():
            if value is _DELETED:
                if self.table.get(key) is not None:
                    del self.table[key]
            else:
                assert isinstance(value, bytes)
                self.table[key] = value
        self._staged.clear()

    def discard(self) -> None:
        """Drop the staged changes (the outputs could not be published)."""
        self._staged.clear()
