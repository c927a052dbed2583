"""The Daytona SDK client of the daytona backend: credentials from settings (or Daytona's
own environment variables), and the translation of the SDK's errors into ours."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from daytona import (
    AsyncDaytona,
    DaytonaAuthenticationError,
    DaytonaConfig,
    DaytonaError,
    DaytonaForbiddenError,
    DaytonaNotFoundError,
)

from rllm.sandboxes.errors import SandboxError, SandboxUnavailableError
from rllm.sandboxes.settings import SandboxSettings

__all__ = ["daytona_config", "daytona_errors", "make_client", "not_found"]

_KEY_HELP = (
    "set RLLM_SANDBOX_DAYTONA_API_KEY (or DAYTONA_API_KEY) to a Daytona API key "
    "(https://app.daytona.io/dashboard/keys)"
)


def daytona_config(settings: SandboxSettings) -> DaytonaConfig:
    """The SDK's configuration: key, API URL and target from ``settings``, else from
    ``DAYTONA_API_KEY`` / ``DAYTONA_API_URL`` / ``DAYTONA_TARGET``.

    Raises:
        SandboxUnavailableError: no API key anywhere (the message names where to set one).
    """
    key = settings.daytona_api_key.get_secret_value() if settings.daytona_api_key else None
    key = key or os.environ.get("DAYTONA_API_KEY")
    if not key:
        raise SandboxUnavailableError(f"the daytona backend has no API key: {_KEY_HELP}")
    return DaytonaConfig(
        api_key=key,
        api_url=settings.daytona_api_url or os.environ.get("DAYTONA_API_URL"),
        target=settings.daytona_target or os.environ.get("DAYTONA_TARGET"),
    )


def make_client(settings: SandboxSettings) -> AsyncDaytona:
    """An ``AsyncDaytona`` for ``settings`` (call inside a running event loop)."""
    config = daytona_config(settings)
    with daytona_errors("connecting to Daytona"):
        return AsyncDaytona(config)


def not_found(exc: BaseException) -> bool:
    """Whether ``exc`` is Daytona's 404 (a sandbox, file or snapshot that is not there)."""
    return isinstance(exc, DaytonaNotFoundError) or getattr(exc, "status_code", None) == 404


@contextmanager
def daytona_errors(what: str) -> Iterator[None]:
    """Re-raise the SDK's errors as ours, ``from`` the original; ``what`` says what failed.

    Raises:
        SandboxUnavailableError: the key was refused (401/403).
        SandboxError: any other failure of the service.
    """
    try:
        yield
    except (DaytonaAuthenticationError, DaytonaForbiddenError) as exc:
        raise SandboxUnavailableError(f"{what}: Daytona refused the API key; {_KEY_HELP}") from exc
    except DaytonaError as exc:
        raise SandboxError(f"{what}: {exc}") from exc
