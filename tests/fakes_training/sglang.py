"""A fake SGLang server at HTTP level: its native ``POST /generate`` on token IDs with
``return_logprob`` and ``logprob_start_len``, answered from a real (tiny) model's
``Engine`` so the logprobs are the model's own.

The answer follows SGLang's documented shape: ``{"text", "output_ids", "meta_info": {"id",
"prompt_tokens", "completion_tokens", "finish_reason", "input_token_logprobs",
"output_token_logprobs"}}``; ``input_token_logprobs`` holds ``[logprob, token_id, null]`` for
``input_ids[logprob_start_len:]``, the first with a ``null`` logprob. Faults for tests:
``wrong_token_at`` names another token at that input position, ``drop_last`` leaves the
last entry out.
"""

from __future__ import annotations

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

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.requests: list[dict[str, Any]] = []
        self.wrong_token_at: int | None = None
        self.drop_last = False
        self.app = Starlette(routes=[Route("/generate", self.generate, methods=["POST"])])

    async def generate(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
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
