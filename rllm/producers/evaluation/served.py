"""What the gateway's upstream serves, asked before an eval: the model names it lists and the
policy version it reports, so that a result is never filed under a model (or a policy
version) that did not produce it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from rllm.errors import ConfigError
from rllm.tls import shared_tls

__all__ = ["ServedPolicy", "check_served", "policy_line", "served_policy"]


@dataclass(frozen=True)
class ServedPolicy:
    """The gateway's upstream, as it describes itself."""

    models: tuple[str, ...]
    """Model ids the upstream lists on ``/v1/models``."""
    policy_version: int | None
    """The policy version answering calls: the one the local model server reports having
    loaded, else the version the gateway stamps steps with; None when neither is known."""
    policy_run: str | None
    """The training run of ``policy_version`` (None: the weights the server started with,
    or not reported)."""

    @property
    def label(self) -> str:
        """Which policy answers, for people: ``3 (run r)``, ``0 (base weights)``,
        ``unknown``."""
        if self.policy_version is None:
            return "unknown"
        of = f"run {self.policy_run}" if self.policy_run else "base weights"
        return f"{self.policy_version} ({of})"


async def served_policy(
    gateway_url: str,
    admin_key: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ServedPolicy:
    """Ask the gateway at ``gateway_url`` what its upstream serves (``GET /v1/models`` and
    ``GET /admin/policy``, with the admin key).

    Raises:
        ConfigError: the gateway is unreachable or does not answer with a model list.
    """
    url = gateway_url.rstrip("/")
    headers = {"Authorization": f"Bearer {admin_key}"} if admin_key else {}
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=30.0, transport=transport, verify=shared_tls()
    ) as http:
        models = await _get(http, url, "/v1/models")
        policy = await _get(http, url, "/admin/policy")
    data = models.get("data")
    ids = (
        tuple(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)
        if isinstance(data, list)
        else ()
    )
    upstream = policy.get("upstream_policy_version")
    if isinstance(upstream, int) and not isinstance(upstream, bool):
        run = policy.get("upstream_policy_run")
        return ServedPolicy(ids, upstream, run if isinstance(run, str) and run else None)
    version, run = policy.get("policy_version"), policy.get("policy_run")
    return ServedPolicy(
        ids,
        version if isinstance(version, int) and not isinstance(version, bool) else None,
        run if isinstance(run, str) and run else None,
    )


async def _get(http: httpx.AsyncClient, url: str, path: str) -> dict[str, Any]:
    try:
        resp = await http.get(path)
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"the gateway at {url} does not answer ({type(exc).__name__}: {exc}), so the "
            f"model it serves cannot be checked; start the stack with `rllm-cli up`, or "
            f"point --gateway-url (RLLM_GATEWAY_URL) at a running gateway"
        ) from exc
    try:
        body = resp.json() if resp.status_code == 200 else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ConfigError(
            f"the gateway at {url} answered GET {path} with {resp.status_code} "
            f"({resp.text[:200]!r}), so the model it serves cannot be checked; give its "
            f"admin key (--admin-key or RLLM_ADMIN_KEY) or check the gateway's upstream"
        )
    return body


def check_served(served: ServedPolicy, model: str, gateway_url: str) -> None:
    """Refuse an eval (or training rollouts) of ``model`` through a gateway whose upstream
    serves other models.

    Raises:
        ConfigError: naming the model asked for, the ones served, and what to do.
    """
    if model in served.models:
        return
    listed = ", ".join(served.models) or "no model"
    raise ConfigError(
        f"model {model!r} is not what the gateway at {gateway_url} serves: its upstream "
        f"lists {listed}. The results would be filed under {model!r} without coming from "
        f"it; start the stack with that model (rllm-cli up --model PROFILE), point "
        f"--gateway-url at a gateway in front of it, or name one of the listed models"
    )


def policy_line(run_id: str, model: str, served: ServedPolicy, asked: str | None) -> str:
    """An eval's first line: which policy it measures (and the one asked for, if any)."""
    line = f"eval {run_id}: {model} serves policy version {served.label}"
    return f"{line} (--policy {asked})" if asked else line
