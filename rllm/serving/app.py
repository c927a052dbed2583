"""The local model server's ASGI app: OpenAI ``chat/completions`` and ``completions`` with
vLLM's token IDs and ``prompt_logprobs``, vLLM's ``/tokenize``, ``/v1/models`` with the
policy version, and an admin reload endpoint. Concurrent requests are batched into one
generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rllm.schemas.lineage import POLICY_HEADER
from rllm.serving.engine import Completion, Engine, PromptLogprobs, SamplingParams
from rllm.serving.protocol import (
    RequestError,
    chat_response,
    completion_response,
    prompt_logprobs_count,
    sampling_params,
)

__all__ = ["POLICY_HEADER", "RequestBatcher", "create_app"]

T = TypeVar("T")


@dataclass
class _Pending:
    prompt: list[int]
    params: SamplingParams
    future: asyncio.Future[list[Completion]] = field(repr=False)
    stop: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set when the request is abandoned: its rows stop at the next token."""


class RequestBatcher:
    """Collects concurrent requests for ``wait_s`` and generates them as one batch."""

    def __init__(self, engine: Engine, max_batch: int = 32, wait_s: float = 0.01) -> None:
        self.engine, self.max_batch, self.wait_s = engine, max_batch, wait_s
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self.batches: deque[int] = deque(maxlen=64)
        """Rows of the most recent generated batches (for tests and ``/health``)."""

    async def submit(self, prompt: list[int], params: SamplingParams) -> list[Completion]:
        """The ``params.n`` completions of one prompt."""
        fut: asyncio.Future[list[Completion]] = asyncio.get_running_loop().create_future()
        item = _Pending(prompt, params, fut)
        await self.queue.put(item)
        try:
            return await fut
        except asyncio.CancelledError:  # the client went away: drop it, queued or running
            item.stop.set()
            raise

    async def run(self) -> None:
        """Serve the queue until cancelled."""
        while True:
            items = [await self.queue.get()]
            rows = items[0].params.n
            deadline = time.monotonic() + self.wait_s
            while rows < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    nxt = await asyncio.wait_for(self.queue.get(), left)
                except TimeoutError:
                    break
                items.append(nxt)
                rows += nxt.params.n
            items = [it for it in items if not it.future.done()]  # not the abandoned ones
            if not items:
                continue
            prompts, params, stops = [], [], []
            for it in items:
                for k in range(it.params.n):
                    seed = None if it.params.seed is None else it.params.seed + k
                    prompts.append(it.prompt)
                    params.append(replace(it.params, seed=seed))
                    stops.append(it.stop)
            self.batches.append(len(prompts))
            try:
                outs = await asyncio.to_thread(self.engine.generate, prompts, params, stops)
            except Exception as exc:
                for it in items:
                    if not it.future.done():
                        it.future.set_exception(exc)
                continue
            at = 0
            for it in items:
                if not it.future.done():
                    it.future.set_result(outs[at : at + it.params.n])
                at += it.params.n


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


def create_app(
    engine: Engine, model_name: str = "local", max_batch: int = 32, batch_wait_ms: float = 10.0
) -> Starlette:
    """The ASGI app serving ``engine``."""
    batcher = RequestBatcher(engine, max_batch, batch_wait_ms / 1000)
    tok = engine.tokenizer

    def respond(
        body: dict[str, Any], status: int = 200, outs: list[Completion] | None = None
    ) -> JSONResponse:
        """JSON with the policy header: the (oldest) version that generated ``outs``, else
        the version loaded now."""
        version = min(o.policy_version for o in outs) if outs else engine.version
        return JSONResponse(body, status_code=status, headers={POLICY_HEADER: str(version)})

    async def read(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError as exc:
            raise RequestError(f"request body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        return body

    def check_len(prompt: list[int]) -> None:
        if len(prompt) >= engine.max_model_len:
            raise RequestError(
                f"prompt has {len(prompt)} tokens; the model's context is {engine.max_model_len}"
            )

    def check_ids(prompt: list[int]) -> None:
        vocab = engine.vocab_size
        bad = [(i, t) for i, t in enumerate(prompt) if not 0 <= t < vocab]
        if bad:
            raise RequestError(
                f"prompt token {bad[0][1]} at position {bad[0][0]} is not in the model's "
                f"vocabulary (IDs 0..{vocab - 1})"
            )

    async def score(prompts: list[list[int]], top_k: int | None) -> list[PromptLogprobs] | None:
        if top_k is None:
            return None
        return (await asyncio.to_thread(engine.prompt_logprobs, prompts, top_k))[0]

    async def generate_and_score(
        prompts: list[list[int]], params: SamplingParams, top_k: int | None
    ) -> tuple[list[list[Completion]], list[PromptLogprobs] | None]:
        """Completions and prompt logprobs; one forward pass when one token is asked for."""
        if top_k is not None and params.max_tokens == 1:
            scored, outs = await asyncio.to_thread(engine.prompt_logprobs, prompts, top_k, params)
            return outs, scored
        generated = asyncio.gather(*(batcher.submit(p, params) for p in prompts))
        return await asyncio.gather(generated, score(prompts, top_k))

    async def chat(request: Request) -> JSONResponse:
        try:
            body = await read(request)
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
            check_len(prompt)
        except RequestError as exc:
            return _error(400, str(exc))
        done = await _unless_gone(request, generate_and_score([prompt], params, top_k))
        if done is None:
            return _error(499, "the client disconnected; its generation was dropped", "Cancelled")
        groups, scored = done
        return respond(
            chat_response(
                body.get("model") or model_name,
                prompt,
                groups[0],
                tok,
                bool(body.get("logprobs")),
                bool(body.get("return_token_ids")),
                None if scored is None else scored[0],
            ),
            outs=groups[0],
        )

    async def completions(request: Request) -> JSONResponse:
        try:
            body = await read(request)
            raw = body.get("prompt")
            if isinstance(raw, str):
                prompts = [list(tok.encode(raw, add_special_tokens=False))]
            elif isinstance(raw, list) and raw and all(_is_id(x) for x in raw):
                prompts = [list(raw)]
            elif isinstance(raw, list) and raw and all(isinstance(x, str | list) for x in raw):
                prompts = [
                    list(tok.encode(x, add_special_tokens=False)) if isinstance(x, str) else list(x)
                    for x in raw
                ]
            else:
                raise RequestError(f"prompt={raw!r} must be a string, token IDs, or a list of them")
            if body.get("echo"):
                raise RequestError("echo=true is not supported by the local model server")
            params = sampling_params(body, chat=False)
            top_k = prompt_logprobs_count(body)
            for i, p in enumerate(prompts):
                if not p or not all(_is_id(x) for x in p):
                    raise RequestError(
                        f"prompt[{i}]={str(p)[:80]} must be a non-empty list of token IDs"
                    )
                check_len(p)
                check_ids(p)
        except RequestError as exc:
            return _error(400, str(exc))
        done = await _unless_gone(request, generate_and_score(prompts, params, top_k))
        if done is None:
            return _error(499, "the client disconnected; its generation was dropped", "Cancelled")
        outs, scored = done
        return respond(
            completion_response(
                body.get("model") or model_name,
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
        try:
            body = await read(request)
            text = body.get("prompt")
            if not isinstance(text, str):
                raise RequestError(f"prompt={text!r} must be a string")
            add_special = body.get("add_special_tokens", True)
            ids = list(tok.encode(text, add_special_tokens=bool(add_special)))
        except RequestError as exc:
            return _error(400, str(exc))
        return respond({"count": len(ids), "max_model_len": engine.max_model_len, "tokens": ids})

    async def models(request: Request) -> JSONResponse:
        return respond(
            {
                "object": "list",
                "data": [
                    {
                        "id": model_name,
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
        return respond(
            {
                "status": "ok",
                "policy_version": engine.version,
                "policy_run": engine.policy_run,
                "dtype": str(next(engine.model.parameters()).dtype).removeprefix("torch."),
                "recent_batch_rows": list(batcher.batches),
                "torch_threads": engine.threads_report(),
            }
        )

    async def reload(request: Request) -> JSONResponse:
        try:
            body = await read(request)
            uri, version = body.get("checkpoint_uri"), body.get("version")
            run = body.get("run_id", "")
            if not isinstance(uri, str) or not isinstance(version, int) or not isinstance(run, str):
                raise RequestError(
                    'reload needs {"checkpoint_uri": str, "version": int[, "run_id": str]}'
                )
            seconds = await asyncio.to_thread(engine.load_checkpoint, uri, version, run)
        except (RequestError, FileNotFoundError, ValueError) as exc:
            return _error(400, str(exc))
        return respond({"policy_version": engine.version, "reload_s": seconds})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(batcher.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/admin/reload", reload, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.state.batcher = batcher
    app.state.engine = engine
    return app
