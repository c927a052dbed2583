"""Built-in agents named by benchmark entries (``chat``, ``code``, ``vlm``, ``search``).

Each is an ``@rollout`` function: one chat-completions call through the session's base URL
with the task's instruction (and images for ``vlm``), returning the reply and its usage.
"""

from __future__ import annotations

from typing import Any

import httpx

from rllm.errors import ConfigError
from rllm.producers.sdk.errors import GatewayRequestError
from rllm.producers.sdk.rollout import Rollout, rollout
from rllm.producers.sdk.types import AgentAnswer, RolloutConfig
from rllm.schemas.types import Task
from rllm.tls import shared_tls

__all__ = ["builtin_agent", "chat_agent", "vlm_agent"]


async def _chat(config: RolloutConfig, messages: list[dict[str, Any]]) -> AgentAnswer:
    body = {"model": config.model, "messages": messages, **config.sampling}
    headers = {"Authorization": f"Bearer {config.api_key}"}
    timeout = httpx.Timeout(600.0, connect=10.0)
    async with httpx.AsyncClient(timeout=timeout, verify=shared_tls()) as http:
        resp = await http.post(f"{config.base_url}/chat/completions", json=body, headers=headers)
    if resp.status_code >= 400:
        raise GatewayRequestError(f"model call failed: {resp.status_code} {resp.text[:300]}")
    data = resp.json()
    usage = data.get("usage") or {}
    text = data["choices"][0]["message"].get("content") or ""
    return AgentAnswer(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        extra={"finish_reason": data["choices"][0].get("finish_reason")},
    )


@rollout(name="chat")
async def chat_agent(task: Task, config: RolloutConfig) -> AgentAnswer:
    """One user turn with the task's instruction."""
    return await _chat(config, [{"role": "user", "content": task.instruction}])


@rollout(name="vlm")
async def vlm_agent(task: Task, config: RolloutConfig) -> AgentAnswer:
    """One user turn with the task's images (``metadata["images"]`` data URLs) and text."""
    images = task.metadata.get("images") or []
    content: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": url}} for url in images
    ]
    content.append({"type": "text", "text": task.instruction})
    return await _chat(config, [{"role": "user", "content": content}])


_BUILTIN: dict[str, Rollout] = {
    "chat": chat_agent,
    "code": chat_agent,
    "search": chat_agent,
    "vlm": vlm_agent,
}


def builtin_agent(name: str) -> Rollout:
    """The built-in agent called ``name``.

    Raises:
        ConfigError: for harness agents (they run on Harbor task folders, not on rows) and
            unknown names.
    """
    if name in _BUILTIN:
        return _BUILTIN[name]
    if name.startswith("harness:"):
        raise ConfigError(
            f"agent {name!r} is a command-line harness run in a sandbox on Harbor task "
            f"folders (task.toml, instruction.md, environment/, tests/), and dataset rows "
            f"carry no environment or verifier: pass --tasks-dir DIR with --agent NAME "
            f"(rllm-cli harness list shows the harnesses), or --agent chat to ask the rows' "
            f"instructions as plain chat"
        )
    raise ConfigError(f"unknown agent {name!r}; built-in agents: {', '.join(sorted(_BUILTIN))}")
