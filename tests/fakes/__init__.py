"""Test doubles of the model server (never of Kafka)."""

from __future__ import annotations

from tests.fakes.upstream import FakeUpstream, create_fake_app, start_fake_upstream

__all__ = ["FakeUpstream", "create_fake_app", "start_fake_upstream"]
