"""Packed token arrays: int32 token IDs and float32 logprobs as little-endian bytes.

This layout is part of the Avro contract (see the ``StepCaptured`` doc string), so any
language can unpack it: ``<i4`` for token IDs, ``<f4`` for logprobs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rllm.errors import SchemaError

__all__ = ["pack_logprobs", "pack_tokens", "unpack_logprobs", "unpack_tokens"]

_I4 = np.dtype("<i4")
_F4 = np.dtype("<f4")


def pack_tokens(token_ids: Sequence[int] | npt.NDArray[np.integer]) -> bytes:
    """Pack token IDs as little-endian int32 bytes.

    Raises:
        SchemaError: if an ID does not fit in int32.
    """
    arr = np.asarray(token_ids)
    if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
        raise SchemaError(f"token id out of int32 range: min={arr.min()} max={arr.max()}")
    return arr.astype(_I4, copy=False).tobytes()


def unpack_tokens(data: bytes) -> npt.NDArray[np.int32]:
    """Unpack little-endian int32 bytes into a read-only array of token IDs."""
    if len(data) % 4:
        raise SchemaError(f"packed token ids must be a multiple of 4 bytes, got {len(data)}")
    return np.frombuffer(data, dtype=_I4)


def pack_logprobs(logprobs: Sequence[float] | npt.NDArray[np.floating]) -> bytes:
    """Pack logprobs as little-endian float32 bytes."""
    return np.asarray(logprobs, dtype=_F4).tobytes()


def unpack_logprobs(data: bytes) -> npt.NDArray[np.float32]:
    """Unpack little-endian float32 bytes into a read-only array of logprobs."""
    if len(data) % 4:
        raise SchemaError(f"packed logprobs must be a multiple of 4 bytes, got {len(data)}")
    return np.frombuffer(data, dtype=_F4)
