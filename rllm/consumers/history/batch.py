"""The columnar buffer of the sink: rows are appended column-wise per table and turned into
one Arrow batch per table; packed token bytes become list arrays without a loop per token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from rllm.consumers.history.ddl import TABLES
from rllm.consumers.history.rows import Row

__all__ = ["RowBuffer"]

_PACKED = {
    "prompt_token_ids": np.int32,
    "response_token_ids": np.int32,
    "response_logprobs": np.float32,
}


class RowBuffer:
    """Buffers rows column-wise per table and builds Arrow batches."""

    def __init__(self) -> None:
        self._cols: dict[str, dict[str, list[Any]]] = {}
        self.rows = 0

    def add(self, table: str, row: dict[str, Any]) -> None:
        """Buffer one row; missing columns take the type's default."""
        cols = self._cols.get(table)
        if cols is None:
            cols = self._cols[table] = {c.name: [] for c in TABLES[table].columns}
        for name, values in cols.items():
            values.append(row.get(name))
        self.rows += 1

    def extend(self, rows: list[Row]) -> None:
        """Buffer several ``(table, row)`` pairs."""
        for table, row in rows:
            self.add(table, row)

    def clear(self) -> None:
        """Forget every buffered row."""
        self._cols.clear()
        self.rows = 0

    def batches(self) -> Iterator[tuple[str, pa.Table]]:
        """One Arrow batch per table that has rows."""
        for name, cols in self._cols.items():
            spec = TABLES[name]
            arrays = [
                _array(values, col.arrow, col.name, col.ch_type)
                for col, values in zip(spec.columns, cols.values(), strict=True)
            ]
            yield name, pa.Table.from_arrays(arrays, schema=spec.schema)


def _array(values: list[Any], typ: pa.DataType, name: str, ch_type: str) -> pa.Array:
    """One column; packed token bytes become a list array without a Python loop per token."""
    if name in _PACKED:
        lengths = np.fromiter((len(v) // 4 for v in values), dtype=np.int64, count=len(values))
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.frombuffer(b"".join(values), dtype=_PACKED[name])
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=typ.value_type))
    if not ch_type.startswith("Nullable"):
        default: Any = _DEFAULTS.get(str(typ))
        if default is not None or pa.types.is_list(typ) or pa.types.is_map(typ):
            fill = default if default is not None else ([] if pa.types.is_list(typ) else {})
            values = [fill if v is None else v for v in values]
    if pa.types.is_map(typ):
        values = [list(v.items()) for v in values]
    return pa.array(values, type=typ)


_DEFAULTS: dict[str, Any] = {
    "string": "",
    "binary": b"",
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "float64": 0.0,
    "float32": 0.0,
}
