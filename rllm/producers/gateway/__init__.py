"""The model gateway: URL-routed sessions in front of an LLM upstream, capturing every call
as a ``StepCaptured`` event on Kafka."""

from __future__ import annotations

from .app import create_app
from .server import serve
from .settings import CaptureMode, GatewaySettings, UpstreamKind

__all__ = ["CaptureMode", "GatewaySettings", "UpstreamKind", "create_app", "serve"]
