"""The user's model profiles in ``$RLLM_CONFIG_DIR/models.json`` (default ``~/.config/rllm``).

The file is written with mode 0600 (its folder 0700) because it may hold an API key; a key
is read from the profile's environment variable first, then from the file, and is only
ever shown masked.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, field_serializer

from rllm.models.errors import ModelConfigError

__all__ = [
    "PROVIDERS",
    "ModelConfigError",
    "ModelProfile",
    "Provider",
    "ProviderDefaults",
    "UserConfig",
    "config_path",
    "load_config",
    "mask_key",
    "resolve_api_key",
    "save_config",
]


class Provider(StrEnum):
    """Where the model runs."""

    LOCAL = "local"
    VLLM = "vllm"
    SGLANG = "sglang"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    OPENAI_COMPATIBLE = "openai-compatible"


@dataclass(frozen=True)
class ProviderDefaults:
    """What a provider starts from."""

    base_url: str
    """API base URL (empty: the user must give one)."""
    model: str
    """Suggested model name."""
    api_key_env: str | None
    """Environment variable holding the key; None when no key is needed."""
    api: str = "openai"
    """Wire API: ``openai`` (chat completions) or ``anthropic`` (Messages)."""


PROVIDERS: dict[Provider, ProviderDefaults] = {
    Provider.LOCAL: ProviderDefaults(
        "http://127.0.0.1:8000/v1", "HuggingFaceTB/SmolLM2-135M-Instruct", None
    ),
    Provider.VLLM: ProviderDefaults("http://127.0.0.1:8000/v1", "Qwen/Qwen3-4B", "VLLM_API_KEY"),
    Provider.SGLANG: ProviderDefaults(
        "http://127.0.0.1:30000/v1", "Qwen/Qwen3-4B", "SGLANG_API_KEY"
    ),
    Provider.OPENAI: ProviderDefaults("https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY"),
    Provider.ANTHROPIC: ProviderDefaults(
        "https://api.anthropic.com/v1",
        "claude-3-5-haiku-latest",
        "ANTHROPIC_API_KEY",
        api="anthropic",
    ),
    Provider.OPENAI_COMPATIBLE: ProviderDefaults("", "", "OPENAI_API_KEY"),
}


class ModelProfile(BaseModel):
    """One named model setup."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Profile name (``model swap NAME``)."""
    provider: Provider
    """Where the model runs."""
    model: str
    """Model name sent upstream."""
    base_url: str
    """API base URL."""
    api: str = "openai"
    """Wire API: ``openai`` or ``anthropic``."""
    api_key_env: str | None = None
    """Environment variable read for the key (wins over ``api_key``)."""
    api_key: SecretStr | None = None
    """Key stored in the file (0600), when the user chose to store one."""

    @field_serializer("api_key", when_used="json")
    def _dump_key(self, value: SecretStr | None) -> str | None:
        return None if value is None else value.get_secret_value()


class UserConfig(BaseModel):
    """Every profile and the active one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    active: str | None = None
    """Name of the profile in use."""
    profiles: dict[str, ModelProfile] = {}
    """Profiles by name."""

    def get(self, name: str | None = None) -> ModelProfile:
        """The named profile, or the active one.

        Raises:
            ModelConfigError: no such profile (the message lists the known ones).
        """
        wanted = name or self.active
        if wanted is None:
            raise ModelConfigError("no model is set up; run `rllm-cli model setup`")
        if wanted not in self.profiles:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise ModelConfigError(f"no model profile {wanted!r} (known: {known})")
        return self.profiles[wanted]


def config_path() -> Path:
    """``$RLLM_CONFIG_DIR/models.json``, else ``$XDG_CONFIG_HOME/rllm``, else ``~/.config/rllm``."""
    folder = os.environ.get("RLLM_CONFIG_DIR")
    if not folder:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        folder = str(Path(base) / "rllm")
    return Path(folder) / "models.json"


def load_config(path: Path | None = None) -> UserConfig:
    """The stored configuration (empty when there is no file).

    Raises:
        ModelConfigError: the file is not valid JSON or not a model configuration.
    """
    path = path or config_path()
    if not path.is_file():
        return UserConfig()
    try:
        return UserConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ModelConfigError(f"{path} is not a valid model configuration: {exc}") from exc


def save_config(config: UserConfig, path: Path | None = None) -> Path:
    """Write atomically with mode 0600 (folder 0700); returns the path."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".models-", suffix=".json")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(config.model_dump_json(indent=2))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)
    return path


def resolve_api_key(profile: ModelProfile) -> tuple[str | None, str]:
    """The key and where it came from (``env VAR``, ``file``, or ``none``)."""
    if profile.api_key_env and os.environ.get(profile.api_key_env):
        return os.environ[profile.api_key_env], f"env {profile.api_key_env}"
    if profile.api_key is not None and profile.api_key.get_secret_value():
        return profile.api_key.get_secret_value(), "file"
    return None, "none"


def mask_key(key: str | None) -> str:
    """``sk-abc...wxyz`` -> ``sk-…wxyz``; short keys become ``****``."""
    if not key:
        return "-"
    if len(key) < 12:
        return "****"
    return f"{key[:3]}…{key[-4:]}"
