"""An in-memory index of when each table row next needs a timer tick.

Rebuilt from the table (which faust restores from its changelog) at the first scan and
every ``rescan_s``, so it survives restarts and rebalances without being stored itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

__all__ = ["DeadlineIndex"]


class DeadlineIndex:
    """``key -> (due wall time, partition)``, with periodic full rescans.

    Args:
        rows: the table of headers (key bytes -> value bytes).
        due_of: ``(value) -> (due, partition)`` for one stored header.
        retick_s: how long to wait before ticking a key again if nothing changed.
        rescan_s: how often to rebuild from ``rows``.
    """

    def __init__(
        self,
        rows: Mapping[bytes, bytes],
        due_of: Callable[[bytes], tuple[float, int]],
        retick_s: float = 5.0,
        rescan_s: float = 30.0,
    ) -> None:
        self.rows, self.due_of = rows, due_of
        self.retick_s, self.rescan_s = retick_s, rescan_s
        self._due: dict[str, tuple[float, int]] = {}
        self._scanned_at: float | None = None

    def set(self, key: str, due: float, partition: int) -> None:
        """Record a row's next due time."""
        self._due[key] = (due, partition)

    def drop(self, key: str) -> None:
        """Forget a deleted row."""
        self._due.pop(key, None)

    def due(self, now: float) -> Iterator[tuple[str, int]]:
        """Keys due at ``now`` (each then waits ``retick_s`` before it is due again)."""
        if self._scanned_at is None or now - self._scanned_at >= self.rescan_s:
            self._scanned_at = now
            self._due = {}
            for raw_key, value in list(self.rows.items()):
                if value is not None:
                    self._due[raw_key.decode()] = self.due_of(value)
        ready = [(k, p) for k, (d, p) in self._due.items() if d <= now]
        for name, partition in ready:
            self._due[name] = (now + self.retick_s, partition)
            yield name, partition
