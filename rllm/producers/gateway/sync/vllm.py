"""``VllmSync``: vLLM serves a new policy through the routes it documents for RL.

A LoRA adapter is loaded at runtime (``POST /v1/load_lora_adapter`` ``{lora_name,
lora_path}``, served when vLLM runs with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``), read back from ``GET /v1/models``, and requests
name it from then on; the adapter before it stays loaded for the calls still in flight, older
ones are unloaded (``POST /v1/unload_lora_adapter``). Full weights are reloaded from disk
with ``POST /collective_rpc`` ``{"method": "reload_weights", "kwargs": {"weights_path"}}``,
served only with ``VLLM_SERVER_DEV_MODE=1``; the version is then tagged
(``POST /update_weight_version``) and read back (``GET /weight_info``) where vLLM has them.
A server without those routes is refused with what to change.
"""

from __future__ import annotations

import logging

import httpx

from rllm.producers.gateway.sync.errors import PolicyLoadRefused
from rllm.producers.gateway.sync.types import Checkpoint, Served, SyncKind, confirming
from rllm.schemas.lineage import PolicyPointer

__all__ = ["VllmSync"]

log = logging.getLogger("rllm.gateway")

_KEEP = 2
"""Adapters kept loaded: the one served and the one before (calls still in flight)."""


def _said(resp: httpx.Response) -> str:
    """What the server answered, for a message."""
    return f"{resp.status_code} {resp.text.strip()[:500]}"


def _tag(pointer: PolicyPointer) -> str:
    """The weight version vLLM is told: ``<run>/v<version>``."""
    return f"{pointer.run_id}/v{pointer.version}"


class VllmSync:
    """One vLLM server behind ``client``.

    Args:
        client: the upstream's client (base URL without ``/v1``).
        timeout_s: how long one load may take.
    """

    kind = SyncKind.VLLM

    def __init__(self, client: httpx.AsyncClient, timeout_s: float) -> None:
        self.client, self.timeout_s = client, timeout_s
        self.adapters: list[tuple[str, PolicyPointer]] = []
        """Adapters this gateway loaded and has not unloaded, oldest first."""
        self._full: PolicyPointer | None = None
        """The full weights last reloaded (without a read-back)."""

    @property
    def url(self) -> str:
        return str(self.client.base_url).rstrip("/")

    async def load(self, checkpoint: Checkpoint) -> Served | None:
        if checkpoint.lora:
            return await self._load_adapter(checkpoint)
        return await self._reload(checkpoint)

    async def _load_adapter(self, cp: Checkpoint) -> Served:
        name = cp.adapter_name
        if not any(n == name for n, _ in self.adapters):
            await self._post(
                "/v1/load_lora_adapter",
                {"lora_name": name, "lora_path": cp.path},
                missing=f"vLLM at {self.url} has no /v1/load_lora_adapter: start it with "
                f"--enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True to load LoRA "
                f"adapter {cp.path}",
                failed=f"vLLM at {self.url} refused LoRA adapter {name} from {cp.path}",
            )
            self.adapters.append((name, cp.pointer))
        if name not in await self._listed():
            raise PolicyLoadRefused(
                f"vLLM at {self.url} acknowledged LoRA adapter {name} but GET /v1/models "
                f"does not list it"
            )
        await self._unload_old()
        return Served(cp.pointer, model=name)

    async def _post(self, path: str, body: dict[str, object], *, missing: str, failed: str) -> None:
        """POST a load; a route the server lacks (404/405) or any other non-200 is
        ``PolicyLoadRefused`` with ``missing`` or ``failed`` and what the server said."""
        resp = await self.client.post(path, json=body, timeout=self.timeout_s)
        if resp.status_code in (404, 405):
            raise PolicyLoadRefused(f"{missing} ({_said(resp)})")
        if resp.status_code != 200:
            raise PolicyLoadRefused(f"{failed}: {_said(resp)}")

    async def _listed(self) -> set[str]:
        """The model ids ``GET /v1/models`` lists (adapters among them)."""
        resp = await self.client.get("/v1/models", timeout=10.0)
        resp.raise_for_status()
        data = resp.json().get("data", [])
        return {m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)}

    async def _unload_old(self) -> None:
        while len(self.adapters) > _KEEP:
            name, _ = self.adapters[0]
            try:
                resp = await self.client.post(
                    "/v1/unload_lora_adapter", json={"lora_name": name}, timeout=self.timeout_s
                )
                if resp.status_code not in (200, 404):
                    log.warning("vLLM kept LoRA adapter %s: %s", name, _said(resp))
            except httpx.HTTPError as exc:
                log.warning("unloading LoRA adapter %s failed: %s", name, exc)
            del self.adapters[0]

    async def _reload(self, cp: Checkpoint) -> Served:
        await self._post(
            "/collective_rpc",
            {"method": "reload_weights", "kwargs": {"weights_path": cp.path}},
            missing=f"vLLM at {self.url} does not expose /collective_rpc, so it cannot reload "
            f"full weights from {cp.path}: start it with VLLM_SERVER_DEV_MODE=1, or train a LoRA "
            f"adapter (--enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)",
            failed=f"vLLM at {self.url} failed to reload weights from {cp.path}",
        )
        self._full = cp.pointer
        tagged = await self.client.post(
            "/update_weight_version", json={"new_version": _tag(cp.pointer)}, timeout=10.0
        )
        if tagged.status_code != 200:  # an older vLLM: the reload's 200 is the confirmation
            return Served(cp.pointer, reported=False)
        answer = await self.serving()
        served = confirming(answer, cp.pointer)
        if served is None:
            _, other = answer
            raise PolicyLoadRefused(
                f"vLLM at {self.url} reloaded {cp.path} but GET /weight_info reports "
                f"{other.pointer if other else None}, not {_tag(cp.pointer)}"
            )
        return served

    async def serving(self) -> tuple[bool, Served | None]:
        """The adapter last loaded while ``/v1/models`` lists it, else the weight version
        ``/weight_info`` reports when it is one of ours (``<run>/v<version>``)."""
        try:
            if self.adapters:
                name, pointer = self.adapters[-1]
                if name in await self._listed():
                    return True, Served(pointer, model=name)
            resp = await self.client.get("/weight_info", timeout=10.0)
        except (httpx.HTTPError, ValueError, AttributeError):
            return False, None
        if resp.status_code != 200:
            return True, None
        try:
            tag = resp.json().get("weight_version")
            run, _, version = str(tag).rpartition("/v")
            return True, Served(PolicyPointer(run, int(version))) if run else None
        except (ValueError, AttributeError):
            return True, None
