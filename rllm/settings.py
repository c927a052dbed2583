"""Settings shared by every service: where Kafka is, where the local stack keeps its data.

Each service has one frozen pydantic-settings class with env prefix ``RLLM_``; a CLI flag
and an environment variable set the same field, and one variable sets one field of one
class: a field whose ``prefix + name`` another class already reads has a variable of its
own (``OwnEnvSettings``), and the name it read before logs a warning naming the new one.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from rllm.errors import ConfigError

__all__ = [
    "KafkaSettings",
    "MovedEnv",
    "OwnEnvSettings",
    "StackSettings",
    "default_home",
    "env_var",
    "model_env",
    "private_home",
]

log = logging.getLogger(__name__)


def default_home() -> Path:
    """``$RLLM_HOME`` or ``~/.rllm``: data of the local stack (every service's default
    data directory lives under it)."""
    env = os.environ.get("RLLM_HOME")
    return Path(env).expanduser() if env else Path.home() / ".rllm"


def private_home(home: Path | None = None) -> Path:
    """Create ``home`` (default ``default_home()``) readable by its owner only (0700), or
    take group and other access away from an existing one that this user owns: it holds
    the history, the gateway's spool and key, logs and checkpoints. Returns it."""
    path = home if home is not None else default_home()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        path.chmod(info.st_mode & 0o700)
    return path


@dataclass(frozen=True)
class MovedEnv:
    """A field that reads a variable of its own instead of ``env_prefix + name``."""

    field: str
    """The field (``model``)."""
    new: str
    """The variable it reads (``RLLM_SERVE_MODEL``)."""
    old: str
    """The variable it read before (``RLLM_MODEL``)."""
    now: str = ""
    """What ``old`` sets today, if anything (``the stack's model profile``)."""


def model_env(service: str) -> tuple[MovedEnv, ...]:
    """The local model's fields of a service that runs one (the trainer, the model server):
    ``model``, ``gguf_file``, ``device`` and ``torch_threads`` read ``RLLM_<SERVICE>_<FIELD>``
    instead of the ``RLLM_<FIELD>`` both read before (``RLLM_MODEL`` names the stack's model
    profile now)."""
    return (
        MovedEnv("model", f"RLLM_{service}_MODEL", "RLLM_MODEL", "the stack's model profile"),
        *(
            MovedEnv(name, f"RLLM_{service}_{name.upper()}", f"RLLM_{name.upper()}")
            for name in ("gguf_file", "device", "torch_threads")
        ),
    )


class _OwnEnvSource(EnvSettingsSource):
    """The environment, with some fields read from a variable of their own."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        names: dict[str, str],
        init_only: tuple[str, ...] = (),
    ) -> None:
        super().__init__(settings_cls)
        self._names = names if self.case_sensitive else {k: v.lower() for k, v in names.items()}
        self._init_only = init_only

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field_name in self._init_only:  # another class's variable: never read here
            return None, field_name, False
        name = self._names.get(field_name)
        if name is None:
            return super().get_field_value(field, field_name)
        return self.env_vars.get(name), field_name, False


class OwnEnvSettings(BaseSettings):
    """Settings whose ``moved_env`` fields read their own variable (``RLLM_SERVE_MODEL``)
    instead of ``env_prefix + name`` (``RLLM_MODEL``, which another class reads), and
    log a warning when the old variable is set while nothing sets the field: a value the
    user gave that this class no longer takes."""

    moved_env: ClassVar[tuple[MovedEnv, ...]] = ()
    """The fields that read a variable of their own, with the name they read before."""
    owner: ClassVar[str] = ""
    """Whose fields these are, for the warning (``the model server``)."""
    init_only: ClassVar[tuple[str, ...]] = ()
    """Fields no environment variable sets (another class's variable holds the value)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        names = {moved.field: moved.new for moved in cls.moved_env}
        source = _OwnEnvSource(settings_cls, names, cls.init_only)
        return init_settings, source, file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _warn_moved(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for moved in cls.moved_env:
            # a keyword or the new variable sets the field: the old one would not count
            if not os.environ.get(moved.old) or moved.field in data:
                continue
            now = f" (it sets {moved.now})" if moved.now else " (it sets nothing now)"
            log.warning(
                "%s is set but no longer sets %s's %s%s; set %s instead",
                moved.old,
                cls.owner,
                moved.field,
                now,
                moved.new,
            )
        return data


def env_var(cls: type[BaseSettings], field: str) -> str:
    """The environment variable that sets ``field`` of settings class ``cls``; '' for a
    field no variable sets (``StackSettings.gateway_port``: its service's variable)."""
    if issubclass(cls, OwnEnvSettings):
        if field in cls.init_only:
            return ""
        for moved in cls.moved_env:
            if moved.field == field:
                return moved.new
    if field not in cls.model_fields:
        raise ConfigError(f"{cls.__name__} has no field {field!r}")
    return f"{cls.model_config.get('env_prefix', '')}{field}".upper()


class KafkaSettings(BaseSettings):
    """How every component reaches Kafka."""

    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="ignore")

    # --- broker ---------------------------------------------------------------------
    bootstrap_servers: str = "127.0.0.1:9092"
    """Comma-separated host:port list of Kafka brokers."""
    client_id: str = "rllm"
    """Client id reported to the broker."""
    security_protocol: str = "PLAINTEXT"
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    sasl_mechanism: str | None = None
    """SASL mechanism (PLAIN, SCRAM-SHA-256, ...) when SASL is used."""
    sasl_username: str | None = None
    """SASL user name."""
    sasl_password: SecretStr | None = None
    """SASL password; never logged."""

    # --- schemas --------------------------------------------------------------------
    schema_registry_url: str | None = None
    """Confluent schema registry URL; without it events use Avro single-object encoding."""

    # --- topics ---------------------------------------------------------------------
    topic_prefix: str = ""
    """Prefix added to every topic name (isolates runs or tests on one broker)."""
    max_message_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Largest event accepted; larger ones are refused with a clear error."""
    request_timeout_s: float = Field(default=30.0, gt=0)
    """How long an admin call or a synchronous produce waits for the broker."""
    replication_factor: int = Field(default=1, ge=1)
    """Replicas of each topic this project creates (3 on a three-broker cluster)."""
    min_insync_replicas: int | None = Field(default=None, ge=1)
    """Replicas that must have a write before it is acknowledged (``acks=all``); default
    one less than ``replication_factor`` (2 of 3), 1 for a single replica."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_servers(cls, value: str) -> str:
        for server in value.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ConfigError(
                    f"bootstrap server {server!r} is not host:port (RLLM_BOOTSTRAP_SERVERS)"
                )
        return value

    @property
    def min_insync(self) -> int:
        """``min.insync.replicas`` of the topics this project creates."""
        if self.min_insync_replicas is not None:
            if self.min_insync_replicas > self.replication_factor:
                raise ConfigError(
                    f"RLLM_MIN_INSYNC_REPLICAS={self.min_insync_replicas} is more than "
                    f"RLLM_REPLICATION_FACTOR={self.replication_factor}: no write could be "
                    f"acknowledged"
                )
            return self.min_insync_replicas
        return max(1, self.replication_factor - 1)

    def topic(self, name: str) -> str:
        """The full topic name with the configured prefix."""
        return f"{self.topic_prefix}{name}"

    def client_config(self) -> dict[str, str | int | float | bool]:
        """librdkafka settings common to producers, consumers and admin clients."""
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            conf["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            conf["sasl.password"] = self.sasl_password.get_secret_value()
        return conf


class StackSettings(OwnEnvSettings):
    """The local stack started by ``rllm-cli up``."""

    # forbid: a keyword this class does not have is an error, not ignored
    model_config = SettingsConfigDict(env_prefix="RLLM_", frozen=True, extra="forbid")

    home: Path = Field(default_factory=default_home)
    """Directory for the stack's data, logs and pid files."""
    kafka_port: int = Field(default=9092, ge=1, le=65535)
    """Port of the local Kafka broker on 127.0.0.1."""
    kafka_heap: str = "512m"
    """JVM heap of the local broker."""
    kafka_brokers: int | None = Field(default=None, ge=1, le=9)
    """Brokers of the local Kafka: 1, or 3 for a cluster with 3 replicas of every topic and
    2 in sync; default what the last ``up`` started, else 1."""
    partitions: int = Field(default=3, ge=1)
    """Partitions of each event topic created by ``up``."""
    services: str = "serve,gateway,processors,history,view"
    """Services ``up`` starts besides Kafka (comma-separated; ``serve`` only for a local
    model)."""
    model: str | None = None
    """Model profile (``rllm-cli model setup``) the gateway forwards to; default: the
    active profile, else the local model. The one field ``RLLM_MODEL`` sets (the model
    server's model is ``RLLM_SERVE_MODEL``, the trainer's ``RLLM_TRAIN_MODEL``)."""

    # The services' ports are the services' own settings (one variable, one field:
    # RLLM_GATEWAY_PORT, RLLM_SERVE_PORT, RLLM_VIEW_PORT), so these are not read from the
    # environment: ``rllm-cli up`` fills them from each service's class
    # (``rllm.cli.stack.stack_settings``) and passes each on with ``--port``.
    gateway_port: int = Field(default=8400, ge=1, le=65535)
    """Port of the gateway ``up`` starts."""
    serve_port: int = Field(default=8000, ge=1, le=65535)
    """Port of the local model server ``up`` starts."""
    view_port: int = Field(default=8500, ge=1, le=65535)
    """Port of the history viewer ``up`` starts on 127.0.0.1."""
    init_only = ("gateway_port", "serve_port", "view_port")

    @property
    def brokers_file(self) -> Path:
        """Where ``up`` records how many brokers it started (``down`` and ``status`` read
        it)."""
        return self.home / "kafka-brokers"

    @property
    def brokers(self) -> int:
        """Brokers of the local Kafka: ``kafka_brokers``, else what the last ``up``
        recorded, else 1."""
        if self.kafka_brokers is not None:
            return self.kafka_brokers
        try:
            recorded = self.brokers_file.read_text().strip()
        except FileNotFoundError:
            return 1
        if not recorded.isdigit() or not 1 <= int(recorded) <= 9:
            raise ConfigError(
                f"{self.brokers_file} holds {recorded!r}, not a broker count from 1 to 9; "
                f"delete it or pass --brokers"
            )
        return int(recorded)

    @property
    def replication_factor(self) -> int:
        """Replicas of each topic: one per broker, at most 3."""
        return min(self.brokers, 3)

    @property
    def kafka_data_dir(self) -> Path:
        """Where the local broker keeps its log (a cluster: one folder per node in it)."""
        return self.home / ("kafka" if self.brokers == 1 else "kafka-cluster")

    @property
    def bootstrap_servers(self) -> str:
        """The local brokers' addresses (node ``i`` on ``kafka_port + 2(i-1)``)."""
        return ",".join(f"127.0.0.1:{self.kafka_port + 2 * i}" for i in range(self.brokers))
