"""A train batch as the Tinker SDK's ``Datum`` objects for ``forward_backward``."""

from __future__ import annotations

import tinker

from rllm.consumers.trainer.types import LossAgg, TrainSequence

__all__ = ["to_datums"]


def _tensor(values: list[float] | list[int], dtype: tinker.TensorDtype) -> tinker.TensorData:
    return tinker.TensorData(data=values, dtype=dtype, shape=[len(values)])


def to_datums(seqs: list[TrainSequence], loss_fn: str, agg: LossAgg) -> list[tinker.Datum]:
    """One ``Datum`` a sequence: the input tokens, their next-token targets and the loss's
    inputs. The service sums token losses, so advantages (or cross-entropy weights) are
    scaled to give the chosen aggregation."""
    total = sum(s.num_loss_tokens for s in seqs) or 1
    out = []
    for s in seqs:
        mask = [float(m) for m in s.loss_mask_T[1:]]
        if agg is LossAgg.TOKEN_MEAN:
            scale = 1.0 / total
        elif agg is LossAgg.SEQ_MEAN_TOKEN_MEAN:
            scale = 1.0 / (len(seqs) * max(s.num_loss_tokens, 1))
        else:
            scale = 1.0 / len(seqs)
        inputs = {"target_tokens": _tensor(s.input_ids_T[1:], "int64")}
        if loss_fn == "cross_entropy":
            inputs["weights"] = _tensor([m * scale for m in mask], "float32")
        else:
            inputs["logprobs"] = _tensor(s.logprobs_T[1:], "float32")
            inputs["advantages"] = _tensor([m * s.advantage * scale for m in mask], "float32")
        out.append(
            tinker.Datum(
                model_input=tinker.ModelInput.from_ints(s.input_ids_T[:-1]),
                loss_fn_inputs=inputs,
            )
        )
    return out
