"""A fake SGLang server at HTTP level: its native ``POST /generate`` on token IDs with
``return_logprob`` and ``logprob_start_len``, answered from a real (tiny) model's
``Engine`` so the logprobs are the model's own.

The answer follows SGLang's documented shape: ``{"text", "output_ids", "meta_info": {"id",
"prompt_tokens", "completion_tokens", "finish_reason", "input_token_logprobs",
"output_token_logprobs"}}``; ``input_token_logprobs`` holds ``[logprob, token_id, null]`` for
``input_ids[logprob_start_len:]``, the first with a ``null`` logprob. Faults for tests:
``wrong_token_at`` names another token at that input position, ``drop_last`` leaves the
last entry out.

Weight sync, as SGLang documents it: ``POST /update_weights_from_disk`` ``{"model_path"}``
answers ``{"success", "message", "num_paused_requests"}`` (400 and ``success`` false when
the load fails: a path in ``refuse``), and ``GET /get_model_info`` reports the
``model_path`` served. With ``gate`` set to a ``threading.Event``, a load waits for it. The
engine is needed by ``/generate`` only.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rllm.serving.engine import Engine, SamplingParams

__all__ = ["FakeSGLang"]


class FakeSGLang:
    """``app`` serves ``/generate`` from ``engine``; ``requests`` records every body."""

    def __init__(self, engine: Engine | None = None, model_path: str = "base-model") -> None:
        self.engine = engine
        self.requests: list[dict[str, Any]] = []
        self.wrong_token_at: int | None = None
        self.drop_last = False
        self.model_path = model_path
        """The folder ``/get_model_info`` reports."""
        self.refuse: set[str] = set()
        """Paths whose load fails."""
        self.gate: threading.Event | None = None
        """Set: every load waits for it."""
        self.loading = 0
        """Loads that arrived."""
        self.app = Starlette(
            routes=[
                Route("/generate", self.generate, methods=["POST"]),
                Route("/update_weights_from_disk", self.update_weights, methods=["POST"]),
                Route("/get_model_info", self.model_info, methods=["GET"]),
            ]
        )

    async def update_weights(self, request: Request) -> JSONResponse:
        path = (await request.json()).get("model_path")
        self.loading += 1
        if self.gate is not None:
            await asyncio.to_thread(self.gate.wait, 30)
        if not isinstance(path, str) or path in self.refuse:
            return JSONResponse(
                {
                    "success": False,
                    "message": f"Failed to load weights from {path}: no such model",
                    "num_paused_requests": 0,
                },
                400,
            )
        self.model_path = path
        return JSONResponse(
            {
                "success": True,
                "message": "Succeeded to update model weights.",
                "num_paused_requests": 0,
            }
        )

    async def model_info(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "model_path": self.model_path,
                "tokenizer_path": self.model_path,
                "is_generation": True,
            }
        )

    async def generate(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        assert self.engine is not None, "FakeSGLang(engine) serves /generate"
        ids = body.get("input_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(x, int) for x in ids):
            return JSONResponse({"error": {"message": "input_ids must be token IDs"}}, 400)
        params = body.get("sampling_params") or {}
        start = int(body.get("logprob_start_len", -1))
        if start < 0:
            start = len(ids) - 1  # SGLang's default: output logprobs only
        out = self.engine.generate(
            [ids],
            [
                SamplingParams(
                    temperature=float(params.get("temperature", 1.0)),
                    max_tokens=int(params.get("max_new_tokens", 16)),
                )
            ],
        )[0]
        meta: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "prompt_tokens": len(ids),
            "completion_tokens": len(out.token_ids),
            "finish_reason": {"type": out.finish_reason},
        }
        if body.get("return_logprob"):
            rows = self.engine.prompt_logprobs([ids])[0][0]
            entries: list[list[Any]] = [[None, ids[start], None]]
            for t in range(start + 1, len(ids)):
                row = rows[t]
                assert row is not None
                token = ids[t] + 1 if t == self.wrong_token_at else ids[t]
                entries.append([row[ids[t]][0], token, None])
            if self.drop_last:
                entries.pop()
            meta["input_token_logprobs"] = entries
            meta["output_token_logprobs"] = [
                [lp, tok, None] for lp, tok in zip(out.logprobs, out.token_ids, strict=True)
            ]
        return JSONResponse({"text": out.text, "output_ids": out.token_ids, "meta_info": meta})
