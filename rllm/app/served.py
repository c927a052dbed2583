"""``GatewayServes``: when the gateway serves a run's policy version.

The gateway adopts a version once its upstream serves it (``producers.gateway.policy``),
stamps steps with it from then on, and says so on ``rllm.policy-updates`` with a
``PolicyServed`` naming itself. A sync run's next batch waits for that record: a
``PolicyFollower`` of the topic wakes the wait the moment it arrives. The gateway's id is
asked once over HTTP (``GET /admin/policy``), and asked again after each ``ASK_S`` without
the record: a gateway restarted under a new id, or one that publishes none, still ends the
wait, one question a second instead of one every 20 ms.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import httpx

from rllm.kafka import PolicyFollower
from rllm.schemas.policy import PolicyServed
from rllm.settings import KafkaSettings
from rllm.tls import shared_tls

if TYPE_CHECKING:
    from rllm.consumers.trainer.loop import Trainer

__all__ = ["ASK_S", "FOLLOWER_NAME", "GatewayServes"]

FOLLOWER_NAME = "trainer-served"
"""Names the follower's consumer group, ``rllm-trainer-served-<run>-<12 hex>``: while it has
members, the run trains against the stack (``rllm.app.hold.training_runs``)."""

ASK_S = 1.0
"""Longest wait on the topic before the gateway is asked over HTTP (and a trainer failure
is seen)."""


class GatewayServes:
    """Follows the ``PolicyServed`` records of one gateway for one run.

    Args:
        gateway_url: the gateway's base URL.
        run_id: the run whose versions are waited for.
        kafka: where ``rllm.policy-updates`` is.
        admin_key: the gateway's admin key (``GET /admin/policy`` needs it); default
            ``$RLLM_ADMIN_KEY``, else the local stack's key file.
    """

    def __init__(
        self, gateway_url: str, run_id: str, kafka: KafkaSettings, admin_key: str | None = None
    ) -> None:
        from rllm.infra.admin_key import resolve_admin_key

        self.url = f"{gateway_url.rstrip('/')}/admin/policy"
        key = resolve_admin_key(admin_key)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.run_id = run_id
        self.gateway_id: str | None = None
        """The gateway's id, from its last answer (None: not asked yet, or it names none)."""
        self.acks: list[PolicyServed] = []
        """Every PolicyServed read, in log order."""
        self.refused: str | None = None
        """Why the gateway's upstream did not load the version last waited for (None: it
        did not refuse it)."""
        self.asked = 0
        """HTTP questions asked (the fallback; the topic ends a wait first)."""
        self._latest: dict[str, tuple[str, int]] = {}
        """Per gateway id, the run and version it adopted last (log order)."""
        self._changed = threading.Condition()
        self._follower = PolicyFollower(
            kafka,
            self._on_records,
            name=f"{FOLLOWER_NAME}-{run_id}",
            poll_s=0.2,
            records=(PolicyServed,),
        )
        self._following = False
        self._http: httpx.Client | None = None
        """One client: a new one per question built a TLS context each time (25-170 ms of
        CPU next to the trainer and the model server's reload)."""

    def start(self) -> GatewayServes:
        """Start following the topic (``wait`` does on first use; again: nothing)."""
        if not self._following:
            self._following = True
            self._follower.start()
        return self

    def _on_records(self, records: list[PolicyServed], _caught_up: bool) -> None:
        if not records:
            return
        with self._changed:
            for rec in records:
                self.acks.append(rec)
                self._latest[rec.gateway_id] = (rec.run_id, rec.version)
            self._changed.notify_all()

    def acknowledged(self, version: int) -> bool:
        """Whether the gateway's last ``PolicyServed`` names this run's ``version``."""
        gateway = self.gateway_id
        return gateway is not None and self._latest.get(gateway) == (self.run_id, version)

    def _ask(self, version: int) -> bool:
        """Ask the gateway once: learn its id; whether it serves this run's ``version``."""
        self.asked += 1
        try:
            if self._http is None:
                self._http = httpx.Client(timeout=5, verify=shared_tls(), headers=self._headers)
            info = self._http.get(self.url).json()
        except (httpx.HTTPError, ValueError):
            return False
        if not isinstance(info, dict):
            return False
        gateway = info.get("gateway_id")
        self.gateway_id = gateway if isinstance(gateway, str) and gateway else None
        error = info.get("sync_error")
        if isinstance(error, dict) and (error.get("run_id"), error.get("version")) == (
            self.run_id,
            version,
        ):
            self.refused = str(error.get("reason") or "the upstream refused it")
        return self._is(info, version)

    def _is(self, info: dict[str, Any], version: int) -> bool:
        if info.get("policy_run") != self.run_id or info.get("policy_version") != version:
            return False
        upstream = info.get("upstream_policy_version")
        upstream_run = info.get("upstream_policy_run")
        return upstream in (None, version) and upstream_run in (None, self.run_id)

    def wait(self, version: int, deadline: float, trainer: Trainer) -> bool:
        """Until the gateway serves ``version`` (True), or the ``time.monotonic()``
        ``deadline`` passes, the trainer fails, or the gateway's upstream refuses the
        version (False; ``refused`` says why)."""
        self.start()
        self.refused = None
        if self.gateway_id is None and self._ask(version):
            return True
        while trainer.failure is None and self.refused is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._changed:
                if self._changed.wait_for(lambda: self.acknowledged(version), min(ASK_S, left)):
                    return True
            if self._ask(version):  # no record within ASK_S: ask (and learn a new id)
                return True
        return False

    def close(self) -> None:
        """Stop following and close the HTTP client."""
        self._follower.stop()
        if self._http is not None:
            self._http.close()
            self._http = None
