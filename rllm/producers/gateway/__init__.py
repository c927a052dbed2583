"""The model gateway: URL-routed sessions in front of an LLM upstream, capturing every call
as a ``StepCaptured`` event on Kafka."""

from __future__ import annotations

from rllm.producers.gateway.app import create_app
from rllm.producers.gateway.server import serve
from rllm.producers.gateway.settings import CaptureMode, GatewaySettings, UpstreamKind

__all__ = ["CaptureMode", "GatewaySettings", "UpstreamKind", "create_app", "serve"]
