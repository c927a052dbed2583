"""Model profiles: which upstream model ``eval``/``train`` talk to, stored per user."""

from __future__ import annotations

from rllm.models.config import (
    PROVIDERS,
    ModelConfigError,
    ModelProfile,
    Provider,
    UserConfig,
    config_path,
    load_config,
    mask_key,
    resolve_api_key,
    save_config,
)

__all__ = [
    "PROVIDERS",
    "ModelConfigError",
    "ModelProfile",
    "Provider",
    "UserConfig",
    "config_path",
    "load_config",
    "mask_key",
    "resolve_api_key",
    "save_config",
]
