"""A fake Tinker service: the ``/api/v1`` routes the ``tinker`` SDK (0.38) sends, served
on a loopback port, so the SDK itself talks to it.

What the SDK sends, read from its source (``tinker/resources``, ``tinker/lib``):

- session set-up: ``POST client/config`` (answered without JWT exchange and without the
  pyqwest transport), ``POST client/dynamic_config``, ``POST create_session``, then
  ``session_heartbeat`` every 10 s and ``telemetry`` batches; ``POST
  sessions/{id}/finish`` on ``ServiceClient.close``;
- ``POST create_model`` ``{session_id, model_seq_id, base_model, lora_config,
  optimizer_config}`` and ``POST get_info`` ``{model_id}``;
- ``POST forward_backward``: a protobuf ``ForwardBackwardRequest`` (``Content-Type:
  application/x-protobuf``), whose result is a protobuf ``ForwardBackwardOutput``;
- ``POST optim_step`` ``{adam_params, model_id, seq_id}``, ``POST save_weights`` and
  ``save_weights_for_sampler`` ``{model_id, path, seq_id}``, ``POST load_weights``
  (``{session_id, model_seq_id, path, optimizer}`` to create a model from a state);
- each training call answers ``{request_id}``; ``POST retrieve_future`` answers
  ``{"type": "try_again"}`` on its first poll, then the result, or ``{"error", "category"}``
  when the request failed.

Refusals as the service gives them: a wrong ``X-API-Key`` answers 401 on every route, an
unknown route 404 ``{"detail": "Not Found"}``, a request the service cannot run (a datum
whose loss inputs do not fit its tokens, a loss input the loss does not take, a ``seq_id``
out of order, a state path never saved) a failed future with category ``user``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tinker.proto import tinker_public_pb2 as pb

from tests.fakes.server import ThreadedServer

__all__ = ["LOSS_INPUTS", "FakeTinker"]

LOSS_INPUTS: dict[str, dict[str, str]] = {
    "cross_entropy": {"target_tokens": "int64", "weights": "float32"},
    "importance_sampling": {
        "target_tokens": "int64",
        "logprobs": "float32",
        "advantages": "float32",
    },
    "ppo": {"target_tokens": "int64", "logprobs": "float32", "advantages": "float32"},
}
"""Each loss's inputs and their dtypes, as the Tinker loss documentation lists them
(tinker-docs.thinkingmachines.ai/tinker/losses): all 1-D, one value per input token."""

_DTYPES = {pb.DTYPE_FLOAT32: ("float32", np.float32), pb.DTYPE_INT64: ("int64", np.int64)}
_PROTO = "application/x-protobuf"
_CLOSE = {"Connection": "close"}
"""For the routes the SDK calls through HTTP clients it never closes (its one-off client
for ``client/config``, refused or not, and its telemetry client, opened while the session
closes): the server ends those connections, so no socket is left open when a test ends."""


class _Refused(Exception):
    """A request the service runs and fails: its future holds the error."""


def _tensor(msg: pb.Tensor) -> dict[str, Any]:
    if msg.dtype not in _DTYPES:
        raise _Refused(f"unsupported dtype {msg.dtype}")
    name, np_dtype = _DTYPES[msg.dtype]
    values = np.frombuffer(msg.dense, dtype=np_dtype).tolist()
    return {"data": values, "dtype": name, "shape": list(msg.shape)}


def _datum(msg: pb.Datum) -> dict[str, Any]:
    tokens: list[int] = []
    for chunk in msg.model_input:
        if chunk.WhichOneof("chunk") != "encoded_text":
            raise _Refused("only encoded_text chunks are served here")
        tokens += np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist()
    return {
        "tokens": tokens,
        "loss_fn_inputs": {k: _tensor(v) for k, v in msg.loss_fn_inputs.items()},
    }


def _check_datum(datum: dict[str, Any], loss_fn: str, i: int) -> None:
    wanted = LOSS_INPUTS[loss_fn]
    got = datum["loss_fn_inputs"]
    if set(got) != set(wanted):
        raise _Refused(
            f"datum {i}: loss {loss_fn!r} takes inputs {sorted(wanted)}, got {sorted(got)}"
        )
    n = len(datum["tokens"])
    for name, t in got.items():
        if t["dtype"] != wanted[name]:
            raise _Refused(f"datum {i}: {name} must be {wanted[name]}, got {t['dtype']}")
        if t["shape"] != [n] or len(t["data"]) != n:
            raise _Refused(f"datum {i}: {name} has shape {t['shape']}, model_input has {n}")


def _output(datums: list[dict[str, Any]], metrics: dict[str, float]) -> bytes:
    """A ``ForwardBackwardOutput``: per-datum ``logprobs`` (-0.5 a target) and ``metrics``."""
    out = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
    for k, v in metrics.items():
        out.metrics[k] = v
    lengths = [len(d["tokens"]) for d in datums]
    record = out.loss_fn_outputs.add(num_datums=len(datums))
    field = record.fields["logprobs"]
    field.dtype = pb.DTYPE_FLOAT32
    field.data = np.full(sum(lengths), -0.5, dtype=np.float32).tobytes()
    field.offsets = np.concatenate([[0], np.cumsum(lengths) * 4]).astype(np.int64).tobytes()
    return out.SerializeToString()


class FakeTinker:
    """The service's state: ``calls`` holds ``(route, body)`` in arrival order (the
    forward_backward body decoded from protobuf), ``steps`` the optimizer steps run,
    ``saved`` the checkpoint paths written."""

    def __init__(self, api_key: str = "tml-test") -> None:
        self.api_key = api_key
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.steps = 0
        self.saved: dict[str, str] = {}
        """Checkpoint path -> the model it was saved from."""
        self.models: dict[str, dict[str, Any]] = {}
        self.finished: list[str] = []
        """Sessions closed by ``ServiceClient.close``."""
        self.unknown: list[str] = []
        """Routes asked for that the service does not serve (answered 404)."""
        self._sessions = itertools.count(1)
        self._requests = itertools.count(1)
        self._results: dict[str, tuple[str, Any]] = {}
        self._polled: set[str] = set()
        self.app = Starlette(
            routes=[
                Route("/api/v1/{op:path}", self._route, methods=["GET", "POST"]),
            ]
        )

    def serve(self) -> ThreadedServer:
        """Serve on a free loopback port; the server's ``url`` is the SDK's ``base_url``."""
        return ThreadedServer(self.app)

    def ops(self) -> list[str]:
        """The training routes called, in order (no session upkeep, no polls)."""
        upkeep = {
            "client/config",
            "client/dynamic_config",
            "create_session",
            "session_heartbeat",
            "telemetry",
            "retrieve_future",
        }
        return [op for op, _ in self.calls if op not in upkeep and not op.startswith("sessions/")]

    def bodies(self, op: str) -> list[dict[str, Any]]:
        """The bodies of the calls to ``op``, in order."""
        return [body for name, body in self.calls if name == op]

    async def _route(self, request: Request) -> Response:
        op = request.path_params["op"]
        if request.headers.get("X-API-Key") != self.api_key:
            self.calls.append((op, {"refused": 401}))
            return JSONResponse({"detail": "Invalid API key"}, status_code=401, headers=_CLOSE)
        raw = await request.body()
        if request.headers.get("content-type", "").startswith(_PROTO):
            body: dict[str, Any] = {}
        else:
            body = json.loads(raw or b"{}")
        handler = _HANDLERS.get(op)
        if op.startswith("sessions/") and op.endswith("/finish"):
            handler = FakeTinker._finish
        if handler is None:
            self.calls.append((op, body))
            self.unknown.append(op)
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        if op == "forward_backward":
            return self._forward_backward(raw)
        self.calls.append((op, body))
        if op == "retrieve_future":
            return self._retrieve(request, body)
        return handler(self, body)

    def _future(self, kind: str, run: Any) -> JSONResponse:
        """Accept a request: its result (or its refusal) waits for ``retrieve_future``."""
        rid = f"req-{next(self._requests)}"
        try:
            self._results[rid] = (kind, run())
        except _Refused as exc:
            self._results[rid] = ("error", {"error": str(exc), "category": "user"})
        return JSONResponse({"request_id": rid})

    def _retrieve(self, request: Request, body: dict[str, Any]) -> Response:
        rid = body.get("request_id", "")
        if rid not in self._results:
            return JSONResponse({"detail": f"unknown request {rid}"}, status_code=404)
        if rid not in self._polled:
            self._polled.add(rid)
            return JSONResponse({"type": "try_again", "request_id": rid, "queue_state": "active"})
        kind, result = self._results.pop(rid)
        if kind == "proto":
            if _PROTO not in request.headers.get("accept", ""):
                return JSONResponse({"detail": "this result is served as protobuf"}, 406)
            return Response(result, media_type=_PROTO)
        return JSONResponse(result)

    def _model(self, model_id: str, seq_id: int | None) -> dict[str, Any]:
        model = self.models.get(model_id)
        if model is None:
            raise _Refused(f"unknown model {model_id}")
        if seq_id is not None:
            if seq_id != model["seq_id"] + 1:
                raise _Refused(f"seq_id {seq_id} out of order, expected {model['seq_id'] + 1}")
            model["seq_id"] = seq_id
        return model

    def _client_config(self, body: dict[str, Any]) -> Response:
        return JSONResponse(
            {"pjwt_auth_enabled": False, "use_pyqwest_transport": False}, headers=_CLOSE
        )

    def _dynamic_config(self, body: dict[str, Any]) -> Response:
        return JSONResponse({})

    def _create_session(self, body: dict[str, Any]) -> Response:
        return JSONResponse(
            {"type": "create_session", "session_id": f"session-{next(self._sessions)}"}
        )

    def _heartbeat(self, body: dict[str, Any]) -> Response:
        return JSONResponse({"type": "session_heartbeat"})

    def _telemetry(self, body: dict[str, Any]) -> Response:
        return JSONResponse({"status": "accepted"}, headers=_CLOSE)

    def _finish(self, body: dict[str, Any]) -> Response:
        self.finished.append(str(body.get("reason", {}).get("type")))
        return JSONResponse({})

    def _new_model(self, body: dict[str, Any], base_model: str, rank: int) -> str:
        model_id = f"{body['session_id']}:train:{body['model_seq_id']}"
        self.models[model_id] = {"base_model": base_model, "rank": rank, "seq_id": 0}
        return model_id

    def _create_model(self, body: dict[str, Any]) -> Response:
        def run() -> dict[str, Any]:
            rank = (body.get("lora_config") or {}).get("rank", 0)
            if rank < 1:
                raise _Refused(f"lora rank must be >= 1, got {rank}")
            model_id = self._new_model(body, body["base_model"], rank)
            return {"model_id": model_id, "type": "create_model"}

        return self._future("json", run)

    def _get_info(self, body: dict[str, Any]) -> Response:
        model = self.models.get(body.get("model_id", ""))
        if model is None:
            return JSONResponse({"detail": f"unknown model {body.get('model_id')}"}, 404)
        return JSONResponse(
            {
                "type": "get_info",
                "model_id": body["model_id"],
                "model_data": {"model_name": model["base_model"]},
                "is_lora": True,
                "lora_rank": model["rank"],
            }
        )

    def _forward_backward(self, raw: bytes) -> Response:
        msg = pb.ForwardBackwardRequest()
        msg.ParseFromString(raw)
        body = {
            "model_id": msg.model_id,
            "seq_id": msg.seq_id,
            "loss_fn": msg.loss_fn,
            "forward_only": msg.forward_only,
            "data": [],
        }
        self.calls.append(("forward_backward", body))

        def run() -> bytes:
            body["data"] = [_datum(d) for d in msg.data]
            self._model(msg.model_id, msg.seq_id)
            if msg.loss_fn not in LOSS_INPUTS:
                raise _Refused(f"unknown loss_fn {msg.loss_fn!r}")
            for i, d in enumerate(body["data"]):
                _check_datum(d, msg.loss_fn, i)
            return _output(body["data"], {"loss:sum": 0.5})

        return self._future("proto", run)

    def _optim_step(self, body: dict[str, Any]) -> Response:
        def run() -> dict[str, Any]:
            self._model(body["model_id"], body.get("seq_id"))
            lr = (body.get("adam_params") or {}).get("learning_rate", 0.0)
            if lr <= 0:
                raise _Refused(f"learning_rate must be > 0, got {lr}")
            self.steps += 1
            return {"metrics": {}}

        return self._future("json", run)

    def _save(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        self._model(body["model_id"], body.get("seq_id"))
        name = body.get("path")
        if not name:
            raise _Refused("a checkpoint needs a name")
        path = f"tinker://{body['model_id']}/{kind}/{name}"
        if path in self.saved and not body.get("overwrite"):
            raise _Refused(f"checkpoint {path} exists")
        self.saved[path] = body["model_id"]
        return {"path": path}

    def _save_weights(self, body: dict[str, Any]) -> Response:
        return self._future("json", lambda: {**self._save(body, "weights"), "type": "save_weights"})

    def _save_for_sampler(self, body: dict[str, Any]) -> Response:
        return self._future(
            "json",
            lambda: {**self._save(body, "sampler_weights"), "type": "save_weights_for_sampler"},
        )

    def _load_weights(self, body: dict[str, Any]) -> Response:
        def run() -> dict[str, Any]:
            path = body["path"]
            if "/weights/" not in path or path not in self.saved:
                raise _Refused(f"no training state at {path}")
            source = self.models[self.saved[path]]
            if body.get("session_id") is not None:
                model_id = self._new_model(body, source["base_model"], source["rank"])
            else:
                model_id = self._model(body["model_id"], body.get("seq_id")) and body["model_id"]
            return {"path": path, "model_id": model_id, "type": "load_weights"}

        return self._future("json", run)


_HANDLERS: dict[str, Any] = {
    "client/config": FakeTinker._client_config,
    "client/dynamic_config": FakeTinker._dynamic_config,
    "create_session": FakeTinker._create_session,
    "session_heartbeat": FakeTinker._heartbeat,
    "telemetry": FakeTinker._telemetry,
    "create_model": FakeTinker._create_model,
    "get_info": FakeTinker._get_info,
    "forward_backward": FakeTinker._forward_backward,
    "optim_step": FakeTinker._optim_step,
    "save_weights": FakeTinker._save_weights,
    "save_weights_for_sampler": FakeTinker._save_for_sampler,
    "load_weights": FakeTinker._load_weights,
    "retrieve_future": FakeTinker._retrieve,
}
