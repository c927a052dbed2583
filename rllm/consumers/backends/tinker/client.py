"""A small HTTP client for the Tinker training service and the batch -> ``Datum`` mapping.

Follows the Tinker SDK's request shapes: every training call is a POST under ``/api/v1``
that returns ``{"request_id"}``; the result is fetched from ``/api/v1/retrieve_future``.
Data go as ``Datum`` objects: ``model_input.chunks[].tokens`` and ``loss_fn_inputs`` of
``TensorData`` (``data``, ``dtype``, ``shape``).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from rllm.consumers.backends.remote import call_service, service_client
from rllm.consumers.trainer.errors import TinkerError
from rllm.consumers.trainer.types import LossAgg, TrainSequence

__all__ = ["TinkerClient", "TinkerError", "to_datums"]


def _tensor(values: list[float] | list[int], dtype: str) -> dict[str, Any]:
    return {"data": values, "dtype": dtype, "shape": [len(values)]}


def to_datums(seqs: list[TrainSequence], loss_fn: str, agg: LossAgg) -> list[dict[str, Any]]:
    """Datums for ``forward_backward``; the service sums token losses, so advantages
    (or cross-entropy weights) are scaled to give the chosen aggregation."""
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
        inputs: dict[str, Any] = {"target_tokens": _tensor(s.input_ids_T[1:], "int64")}
        if loss_fn == "cross_entropy":
            inputs["weights"] = _tensor([m * scale for m in mask], "float32")
        else:
            inputs["logprobs"] = _tensor(s.logprobs_T[1:], "float32")
            inputs["advantages"] = _tensor([m * s.advantage * scale for m in mask], "float32")
        out.append(
            {
                "model_input": {"chunks": [{"type": "encoded_text", "tokens": s.input_ids_T[:-1]}]},
                "loss_fn_inputs": inputs,
            }
        )
    return out


class TinkerClient:
    """Synchronous calls to one training model on the Tinker service."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        transport: httpx.BaseTransport | None = None,
        poll_s: float = 0.5,
        timeout_s: float = 600.0,
    ) -> None:
        self.http = service_client(base_url, {"X-API-Key": api_key}, transport)
        self.poll_s, self.timeout_s = poll_s, timeout_s
        self.model_id: str | None = None
        self._seq = 0

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return call_service(
            self.http, TinkerError, f"Tinker {path}", "POST", f"/api/v1/{path}", json=body
        )

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST and wait for the future's result."""
        if self.model_id is not None:
            self._seq += 1
            body = {"model_id": self.model_id, "seq_id": self._seq, **body}
        first = self._post(path, body)
        if "request_id" not in first:
            return first
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            res = self._post("retrieve_future", {"request_id": first["request_id"]})
            if res.get("type") == "try_again":
                time.sleep(self.poll_s)
                continue
            if res.get("error"):
                raise TinkerError(f"Tinker {path} failed: {res['error']}")
            return res
        raise TinkerError(f"Tinker {path}: no result within {self.timeout_s}s")

    def create_model(self, base_model: str, lora_rank: int) -> str:
        """Create a LoRA training model; returns its id."""
        res = self._call(
            "create_model", {"base_model": base_model, "lora_config": {"rank": lora_rank}}
        )
        self.model_id = str(res["model_id"])
        return self.model_id

    def forward_backward(self, datums: list[dict[str, Any]], loss_fn: str) -> dict[str, Any]:
        """Accumulate gradients of ``loss_fn`` over ``datums``."""
        return self._call(
            "forward_backward", {"forward_backward_input": {"data": datums, "loss_fn": loss_fn}}
        )

    def optim_step(self, lr: float) -> dict[str, Any]:
        """Apply one Adam step."""
        return self._call(
            "optim_step",
            {"adam_params": {"learning_rate": lr, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12}},
        )

    def save_weights_for_sampler(self, name: str) -> str:
        """Save sampler weights; returns their ``tinker://`` path."""
        return str(self._call("save_weights_for_sampler", {"path": name})["path"])

    def save_weights(self, name: str) -> str:
        """Save the full training state; returns its ``tinker://`` path."""
        return str(self._call("save_weights", {"path": name})["path"])

    def load_weights(self, path: str) -> None:
        """Restore a training state saved by ``save_weights``."""
        self._call("load_weights", {"path": path})
