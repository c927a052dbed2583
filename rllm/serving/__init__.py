"""The local model server (``rllm-cli serve``): OpenAI-compatible, vLLM-shaped token IDs
and logprobs, reloads weights on each new policy version."""

from __future__ import annotations

from rllm.serving.app import POLICY_HEADER, create_app
from rllm.serving.engine import Completion, Engine, SamplingParams
from rllm.serving.settings import ServeSettings
from rllm.serving.updates import PolicyFollower

__all__ = [
    "POLICY_HEADER",
    "Completion",
    "Engine",
    "PolicyFollower",
    "SamplingParams",
    "ServeSettings",
    "create_app",
]
