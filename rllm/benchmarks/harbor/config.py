"""``task.toml``, Harbor's task configuration: every field read with its type checked,
every problem collected (not only the first), unknown keys kept with a warning.

Field names and defaults are Harbor's (``harbor.models.task.config``): ``version`` (or
``schema_version``), ``[task]`` (name, description), ``[metadata]`` (free-form),
``[agent]`` / ``[verifier]`` ``timeout_sec`` (default 600), ``user``, ``network_mode``,
``[verifier] env``, ``[solution] env``, ``[environment]`` ``build_timeout_sec`` (600),
``docker_image``, ``cpus`` (1), ``memory_mb`` (2048), ``storage_mb`` (10240), the older
``memory`` / ``storage`` size strings (``"2G"``, ``"512M"``), ``network_mode``
(``public``, ``no-network``, ``allowlist``), ``allowed_hosts`` and the older
``allow_internet``. ``[environment] workdir`` is rllm's addition: the directory the agent,
the oracle and the verifier start in (default: the Dockerfile's last ``WORKDIR``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rllm.benchmarks.errors import HarborTaskError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HarborNetworkMode",
    "TaskConfig",
    "parse_config",
    "parse_size_mb",
]

DEFAULT_TIMEOUT_S = 600.0
"""Harbor's default agent, verifier and build timeout."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:I?B)?\s*$", re.IGNORECASE)
_MB_PER_UNIT = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024.0}


class HarborNetworkMode(StrEnum):
    """Harbor's network modes of a task (or of one phase, agent or verifier)."""

    PUBLIC = "public"
    """Full network access."""
    NO_NETWORK = "no-network"
    """No network at all."""
    ALLOWLIST = "allowlist"
    """Only ``allowed_hosts`` (rllm's sandboxes run it as no network)."""


def parse_size_mb(text: str) -> int:
    """Megabytes in a Harbor size string: ``"2G"`` is 2048, ``"512M"`` 512, ``"1.5G"`` 1536.

    Raises:
        HarborTaskError: not a number followed by K, M, G or T (an optional ``B`` / ``iB`` after).
    """
    match = _SIZE.match(text)
    if match is None:
        raise HarborTaskError(f"size {text!r} is not like '2G', '512M' or '1024K'")
    return int(float(match.group(1)) * _MB_PER_UNIT[match.group(2).upper()])


@dataclass(frozen=True)
class TaskConfig:
    """What ``task.toml`` says, with Harbor's defaults filled in."""

    schema_version: str = "1.0"
    """``version`` (older) or ``schema_version``."""
    name: str | None = None
    """``[task] name`` (``org/name``); None: the task is named after its folder."""
    description: str = ""
    """``[task] description``."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """``[metadata]`` as written (author, difficulty, category, tags, ...)."""
    agent_timeout_s: float = DEFAULT_TIMEOUT_S
    """``[agent] timeout_sec``."""
    agent_user: str | None = None
    """``[agent] user``; None is the image's user."""
    agent_network_mode: HarborNetworkMode | None = None
    """``[agent] network_mode``; None: the environment's."""
    verifier_timeout_s: float = DEFAULT_TIMEOUT_S
    """``[verifier] timeout_sec``."""
    verifier_env: dict[str, str] = field(default_factory=dict)
    """``[verifier] env``."""
    verifier_user: str | None = None
    """``[verifier] user``."""
    verifier_network_mode: HarborNetworkMode | None = None
    """``[verifier] network_mode``; None: the environment's."""
    solution_env: dict[str, str] = field(default_factory=dict)
    """``[solution] env``: the oracle's environment."""
    build_timeout_s: float = DEFAULT_TIMEOUT_S
    """``[environment] build_timeout_sec``."""
    docker_image: str | None = None
    """``[environment] docker_image``: a prebuilt image instead of the Dockerfile."""
    cpus: float = 1.0
    """``[environment] cpus``."""
    memory_mb: int = 2048
    """``[environment] memory_mb`` (or ``memory = "2G"``)."""
    storage_mb: int = 10240
    """``[environment] storage_mb`` (or ``storage = "10G"``)."""
    network_mode: HarborNetworkMode | None = None
    """``[environment] network_mode`` (or ``allow_internet``); None: not said."""
    allowed_hosts: tuple[str, ...] = ()
    """``allowed_hosts`` of ``network_mode = "allowlist"``."""
    workdir: str | None = None
    """``[environment] workdir`` (rllm's); None: the Dockerfile's ``WORKDIR``."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this parser does not know, by ``section.key``, kept as written."""


_KNOWN: dict[str, set[str]] = {
    "": {
        "version",
        "schema_version",
        "task",
        "metadata",
        "agent",
        "verifier",
        "environment",
        "solution",
        "source",
    },
    "task": {"name", "description", "authors", "keywords"},
    "agent": {"timeout_sec", "user", "network_mode", "allowed_hosts"},
    "verifier": {"timeout_sec", "env", "user", "network_mode", "allowed_hosts"},
    "solution": {"env"},
    "environment": {
        "build_timeout_sec",
        "docker_image",
        "cpus",
        "memory_mb",
        "memory",
        "storage_mb",
        "storage",
        "network_mode",
        "allowed_hosts",
        "allow_internet",
        "workdir",
        "gpus",
        "gpu_types",
        "env",
        "os",
    },
}
_UNUSED = {
    "environment.gpus",
    "environment.gpu_types",
    "environment.env",
    "environment.os",
    "agent.allowed_hosts",
    "verifier.allowed_hosts",
}
"""Harbor keys rllm reads but does not act on: a warning when set to a non-default."""


class _Reader:
    """Reads typed values out of the TOML tables, collecting problems and warnings."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def table(self, section: str) -> dict[str, Any]:
        value = self.data.get(section, {})
        if not isinstance(value, dict):
            self.problems.append(f"[{section}] must be a table, got {value!r}")
            return {}
        return value

    def get(self, section: str, key: str) -> Any:
        return (self.table(section) if section else self.data).get(key)

    def bad(self, section: str, key: str, want: str, value: Any) -> None:
        where = f"[{section}] {key}" if section else key
        self.problems.append(f"{where} must be {want}, got {value!r}")

    def number(self, section: str, key: str, default: float) -> float:
        value = self.get(section, key)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value > 0)
        ):
            self.bad(section, key, "a positive number", value)
            return default
        return float(value)

    def integer(self, section: str, key: str, default: int) -> int:
        value = self.get(section, key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.bad(section, key, "a positive integer", value)
            return default
        return value

    def string(self, section: str, key: str) -> str | None:
        value = self.get(section, key)
        if value is not None and not isinstance(value, str):
            self.bad(section, key, "a string", value)
            return None
        return value

    def user(self, section: str) -> str | None:
        value = self.get(section, "user")
        if value is None or (isinstance(value, str) and value):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
        self.bad(section, "user", "a user name or uid", value)
        return None

    def env(self, section: str) -> dict[str, str]:
        value = self.get(section, "env")
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.bad(section, "env", 'a table of strings (env = { NAME = "value" })', value)
            return {}
        return dict(value)

    def network(self, section: str) -> HarborNetworkMode | None:
        value = self.get(section, "network_mode")
        if value is None:
            return None
        try:
            return HarborNetworkMode(value)
        except ValueError:
            modes = ", ".join(repr(m.value) for m in HarborNetworkMode)
            self.bad(section, "network_mode", f"one of {modes}", value)
            return None

    def size(self, key: str, default: int) -> int:
        mb = self.integer("environment", f"{key}_mb", default)
        text = self.get("environment", key)
        if text is None:
            return mb
        if not isinstance(text, str):
            self.bad("environment", key, "a size string like '2G'", text)
            return mb
        if self.get("environment", f"{key}_mb") is not None:
            self.problems.append(f"[environment] has both {key} and {key}_mb; keep {key}_mb")
            return mb
        try:
            return parse_size_mb(text)
        except HarborTaskError as exc:
            self.problems.append(f"[environment] {key}: {exc}")
            return default

    def unknown(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        for section, known in _KNOWN.items():
            table = self.data if not section else self.get("", section)
            if not isinstance(table, dict):
                continue
            for key, value in table.items():
                name = f"{section}.{key}" if section else key
                if key not in known:
                    extra[name] = value
                    self.warnings.append(f"unknown key {name} (kept, not used)")
                elif name in _UNUSED and value not in (0, [], {}, "linux", None):
                    self.warnings.append(f"{name} = {value!r} is not supported by rllm (ignored)")
        return extra


def parse_config(data: dict[str, Any]) -> tuple[TaskConfig, list[str], list[str]]:
    """The config in a parsed ``task.toml``, its problems and its warnings.

    A problem makes the task invalid (a wrong type, an unknown ``network_mode``); a
    warning does not (an unknown key, a Harbor setting rllm does not act on).
    """
    r = _Reader(data)
    version = data.get("schema_version", data.get("version", "1.0"))
    if not isinstance(version, str):
        r.bad("", "version", "a string", version)
        version = "1.0"
    metadata = r.table("metadata")
    network = r.network("environment")
    allow_internet = r.get("environment", "allow_internet")
    if allow_internet is not None and not isinstance(allow_internet, bool):
        r.bad("environment", "allow_internet", "true or false", allow_internet)
    elif network is None and allow_internet is not None:
        network = HarborNetworkMode.PUBLIC if allow_internet else HarborNetworkMode.NO_NETWORK
    hosts = r.get("environment", "allowed_hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        r.bad("environment", "allowed_hosts", "a list of host names", hosts)
        hosts = []
    if hosts and network is None:
        network = HarborNetworkMode.ALLOWLIST
    elif hosts and network is not HarborNetworkMode.ALLOWLIST:
        r.problems.append("[environment] allowed_hosts needs network_mode = 'allowlist'")
    if network is HarborNetworkMode.ALLOWLIST:
        r.warnings.append("network_mode 'allowlist' runs as 'no-network' in rllm's sandboxes")
    workdir = r.string("environment", "workdir")
    if workdir is not None and not workdir.startswith("/"):
        r.bad("environment", "workdir", "an absolute path", workdir)
        workdir = None
    config = TaskConfig(
        schema_version=version,
        name=r.string("task", "name"),
        description=r.string("task", "description") or "",
        metadata=dict(metadata),
        agent_timeout_s=r.number("agent", "timeout_sec", DEFAULT_TIMEOUT_S),
        agent_user=r.user("agent"),
        agent_network_mode=r.network("agent"),
        verifier_timeout_s=r.number("verifier", "timeout_sec", DEFAULT_TIMEOUT_S),
        verifier_env=r.env("verifier"),
        verifier_user=r.user("verifier"),
        verifier_network_mode=r.network("verifier"),
        solution_env=r.env("solution"),
        build_timeout_s=r.number("environment", "build_timeout_sec", DEFAULT_TIMEOUT_S),
        docker_image=r.string("environment", "docker_image"),
        cpus=r.number("environment", "cpus", 1.0),
        memory_mb=r.size("memory", 2048),
        storage_mb=r.size("storage", 10240),
        network_mode=network,
        allowed_hosts=tuple(hosts),
        workdir=workdir,
        extra=r.unknown(),
    )
    return config, list(dict.fromkeys(r.problems)), list(dict.fromkeys(r.warnings))
