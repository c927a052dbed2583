"""The policy's events on ``rllm.policy-updates``: a trainer's new version
(``PolicyUpdated``) and a gateway's acknowledgement that it stamps steps with it
(``PolicyServed``)."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from rllm.schemas.types import AvroRecord, utcnow

__all__ = ["PolicyServed", "PolicyUpdated"]


class PolicyUpdated(AvroRecord):
    """A new policy version from the trainer."""

    avro_name: ClassVar[str] = "rllm.events.PolicyUpdated"
    event_id: str
    """Unique id."""
    run_id: str
    """Training run."""
    version: int
    """New policy version."""
    checkpoint_uri: str
    """Where the weights are."""
    base_model: str = ""
    """Model the policy started from."""
    backend: str = "local"
    """Backend that produced it."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Training metrics of the update."""
    num_episodes: int = 0
    """Episodes in the batch."""
    num_tokens: int = 0
    """Trained tokens in the batch."""
    created_at: datetime = Field(default_factory=utcnow)
    """When the update finished."""


class PolicyServed(AvroRecord):
    """A gateway stamps steps with a policy version from now on: the acknowledgement of a
    ``PolicyUpdated``, on the same topic, that a trainer waits for."""

    avro_name: ClassVar[str] = "rllm.events.PolicyServed"
    event_id: str
    """Unique id: ``<gateway_id>/<run_id>/v<version>``."""
    gateway_id: str
    """The gateway process that adopted it (``GET /admin/policy``'s ``gateway_id``)."""
    run_id: str
    """Training run of the policy ("" for an upstream's own weights)."""
    version: int
    """Policy version steps are stamped with from now on."""
    upstream_reports: bool = False
    """Whether the upstream reported the version itself (the local model server, after its
    reload); False when it reports none and the gateway took what the log names."""
    served_at: datetime = Field(default_factory=utcnow)
    """When the gateway adopted it."""
