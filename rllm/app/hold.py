"""Serve an eval's chosen policy (``rllm.app.policy``) for the eval, then the one before.

One stack serves one policy at a time (``rllm.schemas.lineage``), so choosing one for an
eval points the whole fleet at it: ``served_for`` publishes the records that make the model
server and the gateway serve it, waits until the gateway stamps steps with it, and after
the eval publishes the records that point them back at the policy served before. It
refuses, naming them, while a training run is running against the stack (its rollouts
would sample the eval's policy) or another eval holds it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import httpx

from rllm.app.policy import (
    PolicyChoice,
    current_pointer,
    describe,
    record_of,
    resolve_policy,
)
from rllm.app.served import FOLLOWER_NAME
from rllm.errors import ConfigError, RllmError
from rllm.schemas.lineage import BASE, PolicyPointer, switch_records
from rllm.schemas.policy import PolicyUpdated
from rllm.settings import KafkaSettings
from rllm.tls import shared_tls

if TYPE_CHECKING:
    from rllm.kafka import PolicyFollower

__all__ = [
    "PIN_GROUP_PREFIX",
    "TRAINER_GROUP_PREFIX",
    "pinning_evals",
    "served_for",
    "training_runs",
    "wait_served",
]

log = logging.getLogger(__name__)

TRAINER_GROUP_PREFIX = f"rllm-{FOLLOWER_NAME}-"
"""Consumer groups of running trainers: ``rllm-trainer-served-<run>-<12 hex>`` (the
``GatewayServes`` follower every ``AgentTrainer`` runs while it trains)."""

PIN_NAME = "eval-policy"
"""Names the group an eval holds while the stack serves its choice,
``rllm-eval-policy-<policy>-<12 hex>``: no other eval switches meanwhile."""
PIN_GROUP_PREFIX = f"rllm-{PIN_NAME}-"


def _members(kafka: KafkaSettings, prefix: str) -> list[str]:
    """What the live groups ``<prefix><name>-<12 hex>`` name, sorted."""
    from rllm.kafka import active_groups

    found = active_groups(kafka, prefix)
    return sorted({re.sub(r"-[0-9a-f]{12}$", "", g.removeprefix(prefix)) for g in found})


def training_runs(kafka: KafkaSettings) -> list[str]:
    """The runs whose trainer runs against the stack now (their ``GatewayServes`` group
    has members), sorted."""
    return _members(kafka, TRAINER_GROUP_PREFIX)


def pinning_evals(kafka: KafkaSettings) -> list[str]:
    """The policies other evals have the stack serve for themselves now
    (``<run>:<version>``, ``base``), sorted."""
    return _members(kafka, PIN_GROUP_PREFIX)


def _publish(kafka: KafkaSettings, records: Sequence[PolicyUpdated]) -> None:
    from rllm.kafka import EventPublisher
    from rllm.schemas.topics import POLICY_UPDATES

    with EventPublisher(kafka) as pub:
        for rec in records:
            pub.publish_sync(POLICY_UPDATES, rec.run_id, rec)


def wait_served(
    gateway_url: str, admin_key: str | None, pointer: PolicyPointer, timeout_s: float
) -> None:
    """Until the gateway stamps steps with ``pointer`` and its upstream serves it.

    Raises:
        RllmError: the upstream refused it (its reason), or ``timeout_s`` passed.
    """
    url = f"{gateway_url.rstrip('/')}/admin/policy"
    headers = {"Authorization": f"Bearer {admin_key}"} if admin_key else {}
    deadline = time.monotonic() + timeout_s
    info: object = None
    with httpx.Client(timeout=10, verify=shared_tls(), headers=headers) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                info = http.get(url).json()
            if isinstance(info, dict):
                stamped = (info.get("policy_run") or "", info.get("policy_version"))
                upstream = (info.get("upstream_policy_run"), info.get("upstream_policy_version"))
                if stamped == (pointer.run_id, pointer.version) and upstream in (
                    (None, None),
                    (pointer.run_id, pointer.version),
                ):
                    return
                error = info.get("sync_error")
                if isinstance(error, dict) and (error.get("run_id"), error.get("version")) == (
                    pointer.run_id,
                    pointer.version,
                ):
                    raise RllmError(
                        f"the model server behind the gateway at {gateway_url} did not load "
                        f"{describe(pointer)}: {error.get('reason')}"
                    )
            time.sleep(0.2)
    raise RllmError(
        f"the gateway at {gateway_url} did not serve {describe(pointer)} within "
        f"{timeout_s:.0f} s (it answered {info!r}); do it and its model server follow "
        f"rllm.policy-updates on the same Kafka?"
    )


@contextlib.contextmanager
def served_for(
    choice: PolicyChoice,
    kafka: KafkaSettings,
    gateway_url: str,
    admin_key: str | None = None,
    timeout_s: float = 300.0,
    say: Callable[[str], None] | None = None,
    own_run: str | None = None,
) -> Iterator[PolicyPointer]:
    """Serve ``choice`` through the gateway for the block, then the policy served before;
    yields the run and version served. Nothing is published when it is served already.

    Args:
        own_run: a training run of the caller's own, running now (refused like another's).

    Raises:
        ConfigError: ``choice`` names nothing that can be served, or a training run is
            running (naming it), before anything is published.
        RllmError: the gateway did not serve it (the reason).
    """
    from rllm.kafka import read_policy_log

    records = read_policy_log(kafka)
    target = resolve_policy(choice, records)
    want, now = PolicyPointer.of(target), current_pointer(records)
    plan = switch_records(now, target)
    if not plan:
        yield want
        return
    running = sorted({*training_runs(kafka), *([own_run] if own_run else [])})
    if running:
        raise ConfigError(
            f"policy {choice.text}: run {', '.join(running)} is training against this stack, "
            f"which serves one policy at a time: serving {describe(want)} for this eval would "
            f"have that run's rollouts sample it. Evaluate latest (what is served now), or "
            f"after the run ends"
        )
    others = pinning_evals(kafka)
    if others:
        raise ConfigError(
            f"policy {choice.text}: another eval has this stack serve policy "
            f"{', '.join(others)} for itself now (one policy at a time); evaluate latest "
            f"(what is served now), or after it ends"
        )
    before = record_of(records, now)
    if say is not None:
        say(f"serving {describe(want)} for this eval (then {describe(now or BASE)} again)")
    holder = _hold(kafka, want)
    _publish(kafka, plan)
    try:
        wait_served(gateway_url, admin_key, want, timeout_s)
        yield want
    finally:  # also when it was not served: the fleet is pointed back either way
        try:
            _serve_again(kafka, gateway_url, admin_key, want, before, timeout_s)
        finally:
            holder.stop()


def _hold(kafka: KafkaSettings, want: PolicyPointer) -> PolicyFollower:
    """A member of this eval's group while it holds the stack (``pinning_evals``)."""
    from rllm.kafka import PolicyFollower

    name = "base" if want == BASE else f"{want.run_id}:{want.version}"
    return PolicyFollower(kafka, lambda _r, _c: None, name=f"{PIN_NAME}-{name}").start()


def _serve_again(
    kafka: KafkaSettings,
    gateway_url: str,
    admin_key: str | None,
    want: PolicyPointer,
    before: PolicyUpdated,
    timeout_s: float,
) -> None:
    """Point the fleet back at ``before``, unless someone else published meanwhile (a
    trainer that started: its policy is left served)."""
    from rllm.kafka import read_policy_log

    old = describe(PolicyPointer.of(before))
    try:
        now = current_pointer(read_policy_log(kafka))
        if now != want:
            log.warning(
                "not serving %s again: %s was published during the eval",
                old,
                describe(now or BASE),
            )
            return
        _publish(kafka, switch_records(want, before))
        wait_served(gateway_url, admin_key, PolicyPointer.of(before), timeout_s)
    except RllmError as exc:  # the eval's own outcome (or error) stands
        log.error("serving %s again after the eval failed: %s", old, exc)
