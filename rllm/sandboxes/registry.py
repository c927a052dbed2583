"""Sandbox backends by name: ``get_backend("local")`` and friends.

Each backend is one module, imported only when asked for, so a missing SDK (docker,
daytona, modal) matters only to whoever uses that backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from rllm.errors import ConfigError
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import SandboxBackend

__all__ = ["BACKENDS", "get_backend"]

BACKENDS: dict[str, str] = {
    "local": "rllm.sandboxes.local.backend:LocalBackend",
    "docker": "rllm.sandboxes.docker.backend:DockerBackend",
    "daytona": "rllm.sandboxes.daytona.backend:DaytonaBackend",
    "modal": "rllm.sandboxes.modal.backend:ModalBackend",
}
"""Backend name -> ``module:class``; the class takes one ``SandboxSettings``."""


def get_backend(name: str | None = None, settings: SandboxSettings | None = None) -> SandboxBackend:
    """The backend called ``name`` (default: ``settings.backend``).

    Raises:
        ConfigError: no backend has that name.
        SandboxUnavailableError: the backend cannot run here (what is missing is named).
    """
    settings = settings or SandboxSettings()
    name = name or settings.backend
    target = BACKENDS.get(name)
    if target is None:
        raise ConfigError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module_name, _, attr = target.partition(":")
    factory: Callable[[SandboxSettings], SandboxBackend] = getattr(
        importlib.import_module(module_name), attr
    )
    return factory(settings)
