"""``SglangSync``: SGLang reloads full weights in place (``POST /update_weights_from_disk``
``{"model_path"}``, answered ``{"success", "message"}``) and reports the folder it serves on
``GET /get_model_info`` (``model_path``), which confirms the load."""

from __future__ import annotations

import httpx

from rllm.producers.gateway.sync.errors import PolicyLoadRefused
from rllm.producers.gateway.sync.types import Checkpoint, Served, SyncKind, confirming
from rllm.schemas.lineage import PolicyPointer

__all__ = ["SglangSync"]


class SglangSync:
    """One SGLang server behind ``client``.

    Args:
        client: the upstream's client.
        timeout_s: how long one load may take.
    """

    kind = SyncKind.SGLANG

    def __init__(self, client: httpx.AsyncClient, timeout_s: float) -> None:
        self.client, self.timeout_s = client, timeout_s
        self.loaded: dict[str, PolicyPointer] = {}
        """Folders this gateway had the server load, and the policy each holds."""

    @property
    def url(self) -> str:
        return str(self.client.base_url).rstrip("/")

    async def load(self, checkpoint: Checkpoint) -> Served | None:
        cp = checkpoint
        if cp.lora:
            raise PolicyLoadRefused(
                f"{cp.path} is a LoRA adapter; the gateway reloads only full weights on SGLang "
                f"(/update_weights_from_disk): train full weights, or serve the adapter on vLLM"
            )
        resp = await self.client.post(
            "/update_weights_from_disk", json={"model_path": cp.path}, timeout=self.timeout_s
        )
        if resp.status_code in (404, 405):
            raise PolicyLoadRefused(
                f"SGLang at {self.url} has no /update_weights_from_disk: it cannot load {cp.path}"
            )
        try:
            answer = resp.json()
        except ValueError:
            answer = {}
        if resp.status_code != 200 or not isinstance(answer, dict) or not answer.get("success"):
            said = answer.get("message") if isinstance(answer, dict) else None
            raise PolicyLoadRefused(
                f"SGLang at {self.url} failed to load {cp.path}: {resp.status_code} "
                f"{said or resp.text.strip()[:500]}"
            )
        self.loaded[cp.path] = cp.pointer
        served = confirming(await self.serving(), cp.pointer)
        if served is None:
            raise PolicyLoadRefused(
                f"SGLang at {self.url} answered success loading {cp.path} but GET "
                f"/get_model_info reports model_path {await self._model_path()!r}"
            )
        return served

    async def _model_path(self) -> str | None:
        resp = await self.client.get("/get_model_info", timeout=10.0)
        resp.raise_for_status()
        path = resp.json().get("model_path")
        return path if isinstance(path, str) else None

    async def serving(self) -> tuple[bool, Served | None]:
        """The policy whose folder ``/get_model_info`` names, when it is one this gateway
        had loaded."""
        try:
            path = await self._model_path()
        except (httpx.HTTPError, ValueError, AttributeError):
            return False, None
        pointer = self.loaded.get(path) if path is not None else None
        return True, None if pointer is None else Served(pointer)
