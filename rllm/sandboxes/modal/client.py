"""The Modal SDK as the modal backend uses it: the ``modal`` module (or one injected for
tests), a client from the settings' token (or Modal's own environment variables), and the
translation of its errors into ours."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from rllm.sandboxes.errors import SandboxError, SandboxUnavailableError
from rllm.sandboxes.settings import SandboxSettings

__all__ = ["load_sdk", "make_client", "modal_errors", "not_found", "token"]

_TOKEN_HELP = (
    "set RLLM_SANDBOX_MODAL_TOKEN_ID and RLLM_SANDBOX_MODAL_TOKEN_SECRET (or MODAL_TOKEN_ID "
    "and MODAL_TOKEN_SECRET) to a Modal token (`modal token new`)"
)


def load_sdk(sdk: Any | None) -> Any:
    """``sdk`` when given, else the installed ``modal`` module.

    Raises:
        SandboxUnavailableError: the ``modal`` package is not installed.
    """
    if sdk is not None:
        return sdk
    try:
        import modal
    except ImportError as exc:
        raise SandboxUnavailableError(
            "the modal backend needs the modal SDK: pip install 'modal>=1.6'"
        ) from exc
    module: ModuleType = modal
    return module


def token(settings: SandboxSettings) -> tuple[str, str]:
    """The Modal token (id, secret) from ``settings``, else ``MODAL_TOKEN_ID`` /
    ``MODAL_TOKEN_SECRET``.

    Raises:
        SandboxUnavailableError: either half is missing (the message says where to set it).
    """
    token_id = settings.modal_token_id.get_secret_value() if settings.modal_token_id else None
    secret = settings.modal_token_secret.get_secret_value() if settings.modal_token_secret else None
    token_id = token_id or os.environ.get("MODAL_TOKEN_ID")
    secret = secret or os.environ.get("MODAL_TOKEN_SECRET")
    if not token_id or not secret:
        missing = "token id" if not token_id else "token secret"
        raise SandboxUnavailableError(f"the modal backend has no {missing}: {_TOKEN_HELP}")
    return token_id, secret


def make_client(sdk: Any, settings: SandboxSettings) -> Any:
    """A ``modal.Client`` for the settings' token."""
    token_id, secret = token(settings)
    with modal_errors(sdk, "connecting to Modal"):
        return sdk.Client.from_credentials(token_id, secret)


def not_found(sdk: Any, exc: BaseException) -> bool:
    """Whether ``exc`` says the sandbox or file is not there (or the sandbox has ended)."""
    errors = sdk.exception
    return isinstance(
        exc,
        errors.NotFoundError
        | errors.SandboxTerminatedError
        | errors.SandboxFilesystemNotFoundError,
    )


@contextmanager
def modal_errors(sdk: Any, what: str) -> Iterator[None]:
    """Re-raise Modal's errors as ours, ``from`` the original; ``what`` says what failed.

    Raises:
        SandboxUnavailableError: the token was refused.
        SandboxError: any other failure of the service.
    """
    errors = sdk.exception
    try:
        yield
    except errors.AuthError as exc:
        raise SandboxUnavailableError(f"{what}: Modal refused the token; {_TOKEN_HELP}") from exc
    except errors.Error as exc:
        raise SandboxError(f"{what}: {exc}") from exc
