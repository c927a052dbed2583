"""The local model server's HTTP routes, one function each: OpenAI ``chat/completions`` and
``completions`` with vLLM's token IDs and ``prompt_logprobs``, vLLM's ``/tokenize``,
``/v1/models`` with the policy version, ``/health``, and the admin reload. Every route
reads the served model from ``request.app.state.served`` (``create_app`` puts it there).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rllm.schemas.lineage import POLICY_HEADER
from rllm.serving.batcher import RequestBatcher
from rllm.serving.engine import Completion, Engine, PromptLogprobs, SamplingParams
from rllm.serving.protocol import (
    RequestError,
    chat_response,
    completion_response,
    prompt_logprobs_count,
    sampling_params,
)

__all__ = [
    "ROUTES",
    "ServedModel",
    "chat",
    "completions",
    "health",
    "models",
    "reload",
    "tokenize",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ServedModel:
    """What the routes share: the engine, its batcher, and the name the model is served as."""

    engine: Engine
    batcher: RequestBatcher
    name: str = "local"
    """Name reported by ``/v1/models`` and in responses a request names no model for."""

    def respond(
        self, body: dict[str, Any], status: int = 200, outs: list[Completion] | None = None
    ) -> JSONResponse:
        """JSON with the policy header: the (oldest) version that generated ``outs``, else
        the version loaded now."""
        version = min(o.policy_version for o in outs) if outs else self.engine.version
        return JSONResponse(body, status_code=status, headers={POLICY_HEADER: str(version)})

    def check_len(self, prompt: list[int]) -> None:
        """Refuse a prompt that leaves no room in the model's context."""
        if len(prompt) >= self.engine.max_model_len:
            raise RequestError(
                f"prompt has {len(prompt)} tokens; the model's context is "
                f"{self.engine.max_model_len}"
            )

    def check_ids(self, prompt: list[int]) -> None:
        """Refuse a token ID outside the model's vocabulary."""
        vocab = self.engine.vocab_size
        bad = [(i, t) for i, t in enumerate(prompt) if not 0 <= t < vocab]
        if bad:
            raise RequestError(
                f"prompt token {bad[0][1]} at position {bad[0][0]} is not in the model's "
                f"vocabulary (IDs 0..{vocab - 1})"
            )

    async def score(
        self, prompts: list[list[int]], top_k: int | None
    ) -> list[PromptLogprobs] | None:
        """The prompts' logprobs with ``top_k`` alternatives (None: not asked for)."""
        if top_k is None:
            return None
        return (await asyncio.to_thread(self.engine.prompt_logprobs, prompts, top_k))[0]

    async def generate_and_score(
        self, prompts: list[list[int]], params: SamplingParams, top_k: int | None
    ) -> tuple[list[list[Completion]], list[PromptLogprobs] | None]:
        """Completions and prompt logprobs; one forward pass when one token is asked for."""
        if top_k is not None and params.max_tokens == 1:
            scored, outs = await asyncio.to_thread(
                self.engine.prompt_logprobs, prompts, top_k, params
            )
            return outs, scored
        generated = asyncio.gather(*(self.batcher.submit(p, params) for p in prompts))
        return await asyncio.gather(generated, self.score(prompts, top_k))


def _served(request: Request) -> ServedModel:
    served: ServedModel = request.app.state.served
    return served


async def _read(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise RequestError(f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    return body


async def _unless_gone(request: Request, work: Awaitable[T]) -> T | None:
    """``work``'s result; None, with ``work`` cancelled, once the client disconnects first
    (its queued or running rows are dropped)."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watch = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


def _is_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _error(status: int, message: str, kind: str = "BadRequestError") -> JSONResponse:
    return JSONResponse(
        {
            "error": {"message": message, "type": kind, "param": None, "code": status},
            "object": "error",
        },
        status_code=status,
    )


def _gone() -> JSONResponse:
    return _error(499, "the client disconnected; its generation was dropped", "Cancelled")


async def chat(request: Request) -> JSONResponse:
    """``POST /v1/chat/completions``: the messages through the chat template, then sampled."""
    served = _served(request)
    tok = served.engine.tokenizer
    try:
        body = await _read(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(f"messages={messages!r} must be a non-empty list")
        params = sampling_params(body, chat=True)
        top_k = prompt_logprobs_count(body)
        try:
            prompt = list(
                tok.apply_chat_template(
                    messages, add_generation_prompt=True, tools=body.get("tools")
                )
            )
        except Exception as exc:
            raise RequestError(f"messages do not fit the chat template: {exc}") from exc
        served.check_len(prompt)
    except RequestError as exc:
        return _error(400, str(exc))
    done = await _unless_gone(request, served.generate_and_score([prompt], params, top_k))
    if done is None:
        return _gone()
    groups, scored = done
    return served.respond(
        chat_response(
            body.get("model") or served.name,
            prompt,
            groups[0],
            tok,
            bool(body.get("logprobs")),
            bool(body.get("return_token_ids")),
            None if scored is None else scored[0],
        ),
        outs=groups[0],
    )


def _prompts(raw: Any, tok: Any) -> list[list[int]]:
    """A completion request's ``prompt``: a string, token IDs, or a list of either."""
    if isinstance(raw, str):
        return [list(tok.encode(raw, add_special_tokens=False))]
    if isinstance(raw, list) and raw and all(_is_id(x) for x in raw):
        return [list(raw)]
    if isinstance(raw, list) and raw and all(isinstance(x, str | list) for x in raw):
        return [
            list(tok.encode(x, add_special_tokens=False)) if isinstance(x, str) else list(x)
            for x in raw
        ]
    raise RequestError(f"prompt={raw!r} must be a string, token IDs, or a list of them")


async def completions(request: Request) -> JSONResponse:
    """``POST /v1/completions``: text or token-ID prompts, each sampled ``n`` times."""
    served = _served(request)
    tok = served.engine.tokenizer
    try:
        body = await _read(request)
        prompts = _prompts(body.get("prompt"), tok)
        if body.get("echo"):
            raise RequestError("echo=true is not supported by the local model server")
        params = sampling_params(body, chat=False)
        top_k = prompt_logprobs_count(body)
        for i, p in enumerate(prompts):
            if not p or not all(_is_id(x) for x in p):
                raise RequestError(
                    f"prompt[{i}]={str(p)[:80]} must be a non-empty list of token IDs"
                )
            served.check_len(p)
            served.check_ids(p)
    except RequestError as exc:
        return _error(400, str(exc))
    done = await _unless_gone(request, served.generate_and_score(prompts, params, top_k))
    if done is None:
        return _gone()
    outs, scored = done
    return served.respond(
        completion_response(
            body.get("model") or served.name,
            prompts,
            outs,
            tok,
            body.get("logprobs") is not None,
            bool(body.get("return_token_ids")),
            scored,
        ),
        outs=[o for row in outs for o in row],
    )


async def tokenize(request: Request) -> JSONResponse:
    """``POST /tokenize`` (vLLM's): the token IDs of a string."""
    served = _served(request)
    try:
        body = await _read(request)
        text = body.get("prompt")
        if not isinstance(text, str):
            raise RequestError(f"prompt={text!r} must be a string")
        add_special = body.get("add_special_tokens", True)
        ids = list(served.engine.tokenizer.encode(text, add_special_tokens=bool(add_special)))
    except RequestError as exc:
        return _error(400, str(exc))
    return served.respond(
        {"count": len(ids), "max_model_len": served.engine.max_model_len, "tokens": ids}
    )


async def models(request: Request) -> JSONResponse:
    """``GET /v1/models``: the one served model, with its context and policy version."""
    served = _served(request)
    engine = served.engine
    return served.respond(
        {
            "object": "list",
            "data": [
                {
                    "id": served.name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "rllm",
                    "root": engine.source,
                    "parent": None,
                    "max_model_len": engine.max_model_len,
                    "policy_version": engine.version,
                }
            ],
        }
    )


async def health(request: Request) -> JSONResponse:
    """``GET /health``: the policy served, the arithmetic, recent batches and threads."""
    served = _served(request)
    engine = served.engine
    return served.respond(
        {
            "status": "ok",
            "policy_version": engine.version,
            "policy_run": engine.policy_run,
            "dtype": str(next(engine.model.parameters()).dtype).removeprefix("torch."),
            "recent_batch_rows": list(served.batcher.batches),
            "torch_threads": engine.threads_report(),
        }
    )


async def reload(request: Request) -> JSONResponse:
    """``POST /admin/reload``: load a checkpoint directory as a policy version now."""
    served = _served(request)
    try:
        body = await _read(request)
        uri, version = body.get("checkpoint_uri"), body.get("version")
        run = body.get("run_id", "")
        if not isinstance(uri, str) or not isinstance(version, int) or not isinstance(run, str):
            raise RequestError(
                'reload needs {"checkpoint_uri": str, "version": int[, "run_id": str]}'
            )
        seconds = await asyncio.to_thread(served.engine.load_checkpoint, uri, version, run)
    except (RequestError, FileNotFoundError, ValueError) as exc:
        return _error(400, str(exc))
    return served.respond({"policy_version": served.engine.version, "reload_s": seconds})


ROUTES = [
    Route("/v1/chat/completions", chat, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/tokenize", tokenize, methods=["POST"]),
    Route("/health", health, methods=["GET"]),
    Route("/admin/reload", reload, methods=["POST"]),
]
"""Every route of the server, in the order they are matched."""
