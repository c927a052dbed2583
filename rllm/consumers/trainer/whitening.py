"""Batch whitening of the REINFORCE++ estimators, as verl's ``masked_whiten``: the
processors send each trajectory's group value, and the trainer whitens a batch's values
over all of its loss tokens before the update.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rllm.consumers.trainer.types import TrainSequence
from rllm.errors import ConfigError
from rllm.schemas.types import Estimator

__all__ = ["BATCH_WHITENED", "whiten_over_tokens", "whiten_sequences"]

BATCH_WHITENED = frozenset({Estimator.REINFORCE_PLUS_PLUS, Estimator.REINFORCE_PLUS_PLUS_BASELINE})
"""Estimators whose group values are whitened over each batch's loss tokens."""

Floats = npt.NDArray[np.float64]

_WHITEN_EPS = 1e-8
"""verl's ``masked_whiten`` epsilon (added to the variance and to the token count)."""


def whiten_over_tokens(
    values_B: Sequence[float] | Floats, num_tokens_B: Sequence[int] | npt.NDArray[np.int64]
) -> Floats:
    """verl's ``masked_whiten`` of per-sequence values broadcast over their loss tokens.

    Mean and unbiased variance are taken over all ``sum(num_tokens_B)`` tokens of the
    batch, as verl does over the response mask: ``(v - mean) / sqrt(var + 1e-8)``.

    Raises:
        ValueError: if the lengths differ or a count is negative.
        ConfigError: if the batch has fewer than two loss tokens (verl refuses those too).
    """
    v_B = np.asarray(values_B, dtype=np.float64)
    n_B = np.asarray(num_tokens_B, dtype=np.float64)
    if v_B.shape != n_B.shape or v_B.ndim != 1:
        raise ValueError(
            f"values_B and num_tokens_B must be one-dimensional of one length, got shapes "
            f"{v_B.shape} and {n_B.shape}"
        )
    if np.any(n_B < 0):
        raise ValueError(f"num_tokens_B must be non-negative, got {n_B.tolist()}")
    total = float(n_B.sum())
    if total < 2:
        raise ConfigError(
            f"whitening needs at least two loss tokens in the batch, got {total:g}; use a "
            "larger batch_size or an estimator without batch whitening"
        )
    mean = float((v_B * n_B).sum()) / (total + _WHITEN_EPS)
    var = float((((v_B - mean) ** 2) * n_B).sum()) / (total + _WHITEN_EPS)
    var *= total / (total - 1)
    whitened_B: Floats = (v_B - mean) / np.sqrt(var + _WHITEN_EPS)
    return whitened_B


def whiten_sequences(sequences: Sequence[TrainSequence]) -> None:
    """Replace each sequence's advantage by its whitened value over the batch (in place)."""
    whitened_B = whiten_over_tokens(
        [s.advantage for s in sequences], [s.num_loss_tokens for s in sequences]
    )
    for seq, adv in zip(sequences, whitened_B, strict=True):
        seq.advantage = float(adv)
