"""A fake Tinker service: the ``/api/v1`` training calls with futures, recording requests."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx


class FakeTinker:
    """Answers like the service: each call returns a request id; results via
    ``retrieve_future`` (the first poll says try_again)."""

    def __init__(self, api_key: str = "tml-test") -> None:
        self.api_key = api_key
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._results: dict[str, dict[str, Any]] = {}
        self._polled: set[str] = set()
        self.steps = 0

    def _future(self, result: dict[str, Any]) -> httpx.Response:
        rid = uuid.uuid4().hex
        self._results[rid] = result
        return httpx.Response(200, json={"request_id": rid})

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("X-API-Key") != self.api_key:
            return httpx.Response(401, json={"detail": "invalid API key"})
        op = request.url.path.split("/api/v1/", 1)[-1]
        body = json.loads(request.content or b"{}")
        self.calls.append((op, body))
        if op == "retrieve_future":
            rid = body["request_id"]
            if rid not in self._polled:
                self._polled.add(rid)
                return httpx.Response(200, json={"type": "try_again"})
            return httpx.Response(200, json=self._results.pop(rid))
        if op == "create_model":
            if body["lora_config"]["rank"] < 1:
                return httpx.Response(400, json={"detail": "lora rank must be >= 1"})
            return self._future({"model_id": "model-1"})
        if op == "forward_backward":
            data = body["forward_backward_input"]["data"]
            for d in data:
                n = len(d["model_input"]["chunks"][0]["tokens"])
                for name, t in d["loss_fn_inputs"].items():
                    if t["shape"] != [n] or len(t["data"]) != n:
                        return httpx.Response(400, json={"detail": f"{name} has wrong shape"})
            return self._future({"loss_fn_outputs": [], "metrics": {"loss:sum": 0.5}})
        if op == "optim_step":
            self.steps += 1
            return self._future({"metrics": {}})
        if op in ("save_weights", "save_weights_for_sampler"):
            kind = "sampler_weights" if op.endswith("sampler") else "weights"
            return self._future({"path": f"tinker://model-1/{kind}/{body['path']}"})
        if op == "load_weights":
            return self._future({"path": body["path"]})
        return httpx.Response(404, json={"detail": f"unknown endpoint {op}"})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)
