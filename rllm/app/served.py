"""``GatewayServes``: when the gateway serves a run's policy version.

The gateway adopts a version once its upstream reports it (``producers.gateway.policy``)
and stamps steps with it; a sync run's next batch waits for that.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import httpx

from rllm.tls import shared_tls

if TYPE_CHECKING:
    from rllm.consumers.trainer.loop import Trainer

__all__ = ["GatewayServes"]

POLL_S = 0.02
"""Between two questions to the gateway while a version lands."""


class GatewayServes:
    """Asks one gateway whether it stamps a run's policy version.

    Args:
        gateway_url: the gateway's base URL.
        run_id: the run whose versions are asked about.
    """

    def __init__(self, gateway_url: str, run_id: str) -> None:
        self.url = f"{gateway_url.rstrip('/')}/admin/policy"
        self.run_id = run_id
        self._http: httpx.Client | None = None
        """One client: a new one per question built a TLS context each time (25-170 ms of
        CPU next to the trainer and the model server's reload)."""

    def serves(self, version: int) -> bool:
        """Whether the gateway stamps this run's ``version`` and its upstream serves it."""
        try:
            if self._http is None:
                self._http = httpx.Client(timeout=5, verify=shared_tls())
            info = self._http.get(self.url).json()
        except (httpx.HTTPError, ValueError):
            return False
        return isinstance(info, dict) and self._is(info, version)

    def _is(self, info: dict[str, Any], version: int) -> bool:
        if info.get("policy_run") != self.run_id or info.get("policy_version") != version:
            return False
        upstream = info.get("upstream_policy_version")
        upstream_run = info.get("upstream_policy_run")
        return upstream in (None, version) and upstream_run in (None, self.run_id)

    def wait(self, version: int, deadline: float, trainer: Trainer) -> bool:
        """Until the gateway serves ``version`` (True), or the ``time.monotonic()``
        ``deadline`` passes or the trainer fails (False)."""
        while trainer.failure is None and time.monotonic() < deadline:
            if self.serves(version):
                return True
            time.sleep(POLL_S)
        return False

    def close(self) -> None:
        """Close the HTTP client (a later question opens another)."""
        if self._http is not None:
            self._http.close()
            self._http = None
