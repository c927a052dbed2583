"""A fake vLLM OpenAI server with the weight routes vLLM documents for RL, over the
deterministic fake server of ``tests.fakes.upstream`` (its completions, chat, models).

- LoRA at runtime (``--enable-lora`` with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``):
  ``POST /v1/load_lora_adapter`` ``{lora_name, lora_path}`` answers 200 with vLLM's
  "Success: LoRA adapter ... added successfully." text, or 400 with an error body (a name
  already loaded, a path in ``refuse``); ``POST /v1/unload_lora_adapter`` ``{lora_name}``;
  ``GET /v1/models`` lists the loaded adapters after the base model. Without
  ``runtime_lora`` those routes are not served (404), as in vLLM without the variable.
- Dev mode (``VLLM_SERVER_DEV_MODE=1``): ``POST /collective_rpc`` ``{method, args, kwargs}``
  (``reload_weights`` with ``kwargs.weights_path``) answers ``{"results": [...]}``;
  ``POST /update_weight_version`` ``{new_version}`` and ``GET /weight_info``
  ``{"weight_version"}``. Without ``dev_mode`` they are not served.

A slow load: with ``gate`` set to a ``threading.Event``, every load waits for it (``loading``
counts the loads that arrived).
"""

from __future__ import annotations

import asyncio
import threading

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.upstream import FakeUpstream, ThreadedServer, create_fake_app

__all__ = ["FakeVllm"]


def _error(message: str, status: int = 400) -> JSONResponse:
    kind = "BadRequestError" if status == 400 else "NotFoundError"
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}}, status_code=status
    )


class FakeVllm:
    """``app``: the fake server with the weight routes its flags serve."""

    def __init__(
        self,
        runtime_lora: bool = True,
        dev_mode: bool = False,
        upstream: FakeUpstream | None = None,
    ) -> None:
        self.upstream = upstream or FakeUpstream()
        """The OpenAI side: ``requests`` holds every call's body (its ``model`` too)."""
        self.adapters: dict[str, str] = {}
        """Loaded LoRA adapters: name -> path."""
        self.weights_path: str | None = None
        """The folder full weights were last reloaded from."""
        self.weight_version = "default"
        self.refuse: set[str] = set()
        """Paths whose load fails (400)."""
        self.gate: threading.Event | None = None
        """Set: every load waits for it."""
        self.loading = 0
        """Loads that arrived."""
        self.unloaded: list[str] = []
        self.app = create_fake_app(self.upstream)
        routes = []
        if runtime_lora:
            routes += [
                Route("/v1/load_lora_adapter", self.load_lora, methods=["POST"]),
                Route("/v1/unload_lora_adapter", self.unload_lora, methods=["POST"]),
            ]
        if dev_mode:
            routes += [
                Route("/collective_rpc", self.collective_rpc, methods=["POST"]),
                Route("/update_weight_version", self.update_weight_version, methods=["POST"]),
                Route("/weight_info", self.weight_info, methods=["GET"]),
            ]
        self.app.router.routes[:0] = routes

    async def _wait(self) -> None:
        self.loading += 1
        if self.gate is not None:
            await asyncio.to_thread(self.gate.wait, 30)

    def _listed(self) -> None:
        self.upstream.extra_models = tuple(self.adapters)

    async def load_lora(self, request: Request) -> Response:
        body = await request.json()
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return _error("Both 'lora_name' and 'lora_path' must be provided.")
        if name in self.adapters:
            return _error(f"The lora adapter '{name}' has already been loaded.")
        await self._wait()
        if path in self.refuse:
            return _error(f"Loading lora {name} failed: No adapter found for {path}")
        self.adapters[name] = path
        self._listed()
        return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

    async def unload_lora(self, request: Request) -> Response:
        name = (await request.json()).get("lora_name")
        if name not in self.adapters:
            return _error(f"The lora adapter '{name}' cannot be found.", 404)
        del self.adapters[name]
        self.unloaded.append(name)
        self._listed()
        return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")

    async def collective_rpc(self, request: Request) -> Response:
        body = await request.json()
        if body.get("method") != "reload_weights":
            return _error(f"no method {body.get('method')!r}")
        path = (body.get("kwargs") or {}).get("weights_path")
        await self._wait()
        if path in self.refuse:
            return JSONResponse({"error": f"cannot load weights from {path}"}, 500)
        self.weights_path = path
        return JSONResponse({"results": [None]})

    async def update_weight_version(self, request: Request) -> Response:
        self.weight_version = str((await request.json())["new_version"])
        return JSONResponse({"success": True, "new_version": self.weight_version})

    async def weight_info(self, request: Request) -> Response:
        return JSONResponse({"weight_version": self.weight_version})

    def serve(self) -> ThreadedServer:
        """Serve it on a free loopback port."""
        return ThreadedServer(self.app)
