"""Policy sync: the gateway gets each new policy served by its model server, then stamps it.

``make_sync`` builds the ``PolicySync`` for a kind of server (``local``, ``vllm``,
``sglang``, ``log``); ``checkpoint_of`` turns a ``PolicyUpdated`` into the folder the server
loads (the trainer's ``<dir>/<run_id>/v<version>``, or the same under
``upstream_checkpoint_dir`` when the server mounts the checkpoints elsewhere).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from rllm.producers.gateway.settings import GatewaySettings, UpstreamKind
from rllm.producers.gateway.sync.errors import PolicyLoadRefused
from rllm.producers.gateway.sync.local import LocalSync, LogSync, health_policy
from rllm.producers.gateway.sync.sglang import SglangSync
from rllm.producers.gateway.sync.types import Checkpoint, PolicySync, Served, SyncKind, WeightsKind
from rllm.producers.gateway.sync.vllm import VllmSync
from rllm.schemas.lineage import BASE, PolicyPointer
from rllm.schemas.policy import PolicyUpdated

__all__ = [
    "Checkpoint",
    "LocalSync",
    "LogSync",
    "PolicyLoadRefused",
    "PolicySync",
    "Served",
    "SglangSync",
    "SyncKind",
    "VllmSync",
    "WeightsKind",
    "checkpoint_of",
    "detect_kind",
    "make_sync",
]


def make_sync(kind: SyncKind, client: httpx.AsyncClient, timeout_s: float) -> PolicySync:
    """The ``PolicySync`` of ``kind`` for the server behind ``client``."""
    if kind is SyncKind.VLLM:
        return VllmSync(client, timeout_s)
    if kind is SyncKind.SGLANG:
        return SglangSync(client, timeout_s)
    if kind is SyncKind.LOCAL:
        return LocalSync(client)
    return LogSync()


async def detect_kind(settings: GatewaySettings, client: httpx.AsyncClient) -> SyncKind | None:
    """``settings.policy_sync``, else the upstream's: sglang, log for a hosted API, and for
    a vLLM-compatible one ``local`` when it reports a policy on ``/health`` (our model
    server), else ``vllm``; None while it cannot be asked."""
    if settings.policy_sync is not None:
        return settings.policy_sync
    if settings.upstream_kind is UpstreamKind.SGLANG:
        return SyncKind.SGLANG
    if settings.upstream_kind is UpstreamKind.HOSTED:
        return SyncKind.LOG
    answered, policy = await health_policy(client)
    if not answered:
        return None
    return SyncKind.VLLM if policy is None else SyncKind.LOCAL


def checkpoint_of(record: PolicyUpdated, settings: GatewaySettings) -> Checkpoint:
    """The folder the server loads for ``record``, and whether it is a LoRA adapter.

    Raises:
        PolicyLoadRefused: the checkpoint is not on a file system (``tinker://``, ...).
    """
    if PolicyPointer.of(record) == BASE:
        raise PolicyLoadRefused(
            "the base weights (run '', version 0): a vLLM or SGLang server is not told to go "
            "back to the weights it started with; restart it to serve them"
        )
    uri = urlparse(record.checkpoint_uri)
    if uri.scheme not in ("", "file") or not record.checkpoint_uri:
        raise PolicyLoadRefused(
            f"policy {record.run_id} version {record.version} is at "
            f"{record.checkpoint_uri!r}, not in a folder a model server can load"
        )
    local = Path(unquote(uri.path) if uri.scheme else record.checkpoint_uri)
    weights = settings.policy_weights
    lora = weights is WeightsKind.LORA or (
        weights is WeightsKind.AUTO and (local / "adapter_config.json").is_file()
    )
    root = settings.upstream_checkpoint_dir
    path = f"{root.rstrip('/')}/{record.run_id}/{local.name}" if root else str(local)
    return Checkpoint(PolicyPointer.of(record), path, lora)
