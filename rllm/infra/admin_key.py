"""The local stack's gateway admin key: generated once by ``rllm-cli up`` (or a secure
``rllm-cli gateway``), stored 0600 under ``$RLLM_HOME/gateway/admin-key``, and read by the
CLI commands and the SDK so they keep working against the stack without a flag.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from rllm.errors import ConfigError
from rllm.settings import default_home

__all__ = [
    "ADMIN_KEY_ENV",
    "admin_key_path",
    "ensure_admin_key",
    "read_admin_key",
    "resolve_admin_key",
]

ADMIN_KEY_ENV = "RLLM_ADMIN_KEY"
"""The environment variable a client's admin key comes from first (it wins over the file)."""


def admin_key_path(home: Path | None = None) -> Path:
    """Where the stack under ``home`` (default ``$RLLM_HOME``) keeps its admin key."""
    return (home or default_home()) / "gateway" / "admin-key"


def read_admin_key(path: Path) -> str | None:
    """The key stored at ``path``; None when there is no file.

    Raises:
        ConfigError: the file is empty, or others may read or write it.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"admin key file {path} has mode {stat.S_IMODE(mode):o}; others may read it. "
            f"Run chmod 600 {path} (or delete it and restart the gateway for a new key)"
        )
    key = path.read_text(encoding="utf-8").strip()
    if not key:
        raise ConfigError(f"admin key file {path} is empty; delete it to generate a new key")
    return key


def ensure_admin_key(path: Path) -> str:
    """The key at ``path``, generated (32 random bytes, mode 0600) when there is none."""
    existing = read_admin_key(path)
    if existing is not None:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = f"rllm-ak-{secrets.token_urlsafe(32)}"
    try:  # O_EXCL: two starts at once agree on the first key written
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_admin_key(path) or key
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(key + "\n")
    return key


def resolve_admin_key(explicit: str | None = None) -> str | None:
    """A client's admin key: ``explicit``, else ``$RLLM_ADMIN_KEY``, else the local stack's
    key file (``$RLLM_HOME/gateway/admin-key``), else None."""
    if explicit:
        return explicit
    env = os.environ.get(ADMIN_KEY_ENV)
    if env:
        return env
    return read_admin_key(admin_key_path())
