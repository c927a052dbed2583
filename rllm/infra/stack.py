"""``rllm-cli up`` / ``down`` / ``status``: the local stack on the embedded defaults.

Kafka first (a real broker from ``infra/kafka``), its topics, then the services as
background ``rllm-cli`` processes: the local model server (when the model is local), the
gateway in front of the model, the stream processors, the history service and its viewer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rllm.errors import ConfigError, KafkaUnavailableError
from rllm.infra.admin_key import admin_key_path, ensure_admin_key
from rllm.infra.broker import LocalBroker, LocalCluster
from rllm.infra.services import ServiceSpec, service_running, start_service, stop_service
from rllm.kafka import check_broker, ensure_topics, list_topics
from rllm.settings import KafkaSettings, StackSettings, private_home

if TYPE_CHECKING:
    from rllm.models.profiles import ModelProfile

__all__ = ["ComponentStatus", "plan_services", "stack_down", "stack_status", "stack_up"]

SERVICE_ORDER = ("serve", "gateway", "processors", "history", "view")


@dataclass(frozen=True)
class ComponentStatus:
    """One piece of the stack and whether it runs."""

    name: str
    """Component name."""
    running: bool
    """Whether it runs and answers."""
    address: str
    """Where it listens."""
    detail: str = ""
    """Data directory, topic list, log file or the reason it is down."""


def _broker(stack: StackSettings) -> LocalBroker | LocalCluster:
    if stack.brokers == 1:
        return LocalBroker(stack.kafka_port, stack.kafka_data_dir, stack.kafka_heap)
    return LocalCluster(stack.kafka_port, stack.kafka_data_dir, stack.brokers, stack.kafka_heap)


def _kafka(stack: StackSettings) -> KafkaSettings:
    return KafkaSettings(
        bootstrap_servers=stack.bootstrap_servers, replication_factor=stack.replication_factor
    )


def _wanted(stack: StackSettings) -> list[str]:
    names = [s.strip() for s in stack.services.split(",") if s.strip()]
    unknown = sorted(set(names) - set(SERVICE_ORDER))
    if unknown:
        raise ConfigError(
            f"unknown service(s) {', '.join(unknown)} in RLLM_SERVICES / --services; "
            f"known: {', '.join(SERVICE_ORDER)}"
        )
    return [s for s in SERVICE_ORDER if s in names]


def _serve_threads() -> str:
    """torch threads of the model server: ``$RLLM_SERVE_TORCH_THREADS``, else ``auto``. The
    broker, processors, history and the eval's sandboxes share the cores, so the fastest
    count depends on their load and changes while it runs. ``auto`` times the decode
    steps and keeps the faster of 1 and all cores."""
    return os.environ.get("RLLM_SERVE_TORCH_THREADS") or "auto"


def _profile(stack: StackSettings) -> ModelProfile:
    """The model profile the stack serves: the one named (``--model``) or active, else
    the local model on the stack's serve port."""
    from rllm.models.profiles import PROVIDERS, ModelProfile, Provider, load_config

    config = load_config()
    name = stack.model or config.active
    if name is not None and (name != "local" or "local" in config.profiles):
        return config.get(name)
    return ModelProfile(
        name="local",
        provider=Provider.LOCAL,
        model=PROVIDERS[Provider.LOCAL].model,
        base_url=f"http://127.0.0.1:{stack.serve_port}/v1",
    )


def plan_services(stack: StackSettings, insecure: bool = False) -> list[ServiceSpec]:
    """The services ``up`` starts, in order, with their commands and health URLs; the
    gateway reads its admin key from the stack's key file, or runs ``--insecure``."""
    from rllm.models.profiles import Provider

    profile = _profile(stack)
    local_model = profile.provider is Provider.LOCAL
    kind = {Provider.LOCAL: "vllm", Provider.VLLM: "vllm", Provider.SGLANG: "sglang"}.get(
        profile.provider, "hosted"
    )
    upstream = f"http://127.0.0.1:{stack.serve_port}" if local_model else profile.base_url
    env = {
        "RLLM_BOOTSTRAP_SERVERS": stack.bootstrap_servers,
        "RLLM_REPLICATION_FACTOR": str(stack.replication_factor),
    }
    specs = {
        "serve": ServiceSpec(
            "serve",
            ("serve", "--port", str(stack.serve_port), "--served-model-name", profile.model),
            health_url=f"http://127.0.0.1:{stack.serve_port}/health",
            # RLLM_MODEL names the stack's model profile: blank, so the server does not warn
            # that it no longer reads it (it loads RLLM_SERVE_MODEL, else the default model);
            # it generates each batch to the end: wait for an eval's burst to join one batch
            env={
                **env,
                "RLLM_MODEL": "",
                "RLLM_SERVE_TORCH_THREADS": _serve_threads(),
                "RLLM_BATCH_WAIT_MS": os.environ.get("RLLM_BATCH_WAIT_MS") or "500",
            },
            ready_timeout_s=300.0,
        ),
        "gateway": ServiceSpec(
            "gateway",
            (
                "gateway",
                "--port",
                str(stack.gateway_port),
                "--upstream",
                upstream,
                "--upstream-kind",
                kind,
                # the local model server answers whole: the gateway streams its answer itself
                *(("--no-upstream-streams",) if local_model else ()),
                # it loads each checkpoint itself and says so on /health
                *(("--policy-sync", "local") if local_model else ()),
                *(
                    ("--tokenizer", profile.model)
                    if kind == "sglang" and not os.environ.get("RLLM_GATEWAY_TOKENIZER")
                    else ()
                ),
                "--spool-dir",
                str(stack.home / "gateway-spool"),
                *(
                    ("--insecure",)
                    if insecure
                    else ("--admin-key-file", str(admin_key_path(stack.home)))
                ),
            ),
            health_url=f"http://127.0.0.1:{stack.gateway_port}/health",
            env=env,
        ),
        "processors": ServiceSpec("processors", ("process",), env=env),
        "history": ServiceSpec(
            "history", ("history", "--history-dir", str(stack.home / "history")), env=env
        ),
        # after history: it reads through the history service's socket
        "view": ServiceSpec(
            "view",
            ("view", "--port", str(stack.view_port), "--history-dir", str(stack.home / "history")),
            health_url=f"http://127.0.0.1:{stack.view_port}/healthz",
            env=env,
        ),
    }
    wanted = _wanted(stack)
    return [specs[s] for s in wanted if s != "serve" or local_model]


def stack_up(
    stack: StackSettings, say: Callable[[str], None] | None = None, insecure: bool = False
) -> list[ComponentStatus]:
    """Start the broker, create every topic, start the services; idempotent. Installs the
    default local model first when the model server will serve it and it is missing, and
    generates the gateway's admin key (``$RLLM_HOME/gateway/admin-key``, 0600) unless
    ``insecure``.

    Args:
        stack: the stack's settings.
        say: called with a line for each slow step (the CLI prints it).
        insecure: start the gateway without an admin key (anyone may use any session).

    Raises:
        InfraError: with the log's tail when a piece does not start.
    """
    from rllm.models.local import hf_copy_complete, install_local_model, local_model_installed

    tell = say or (lambda _line: None)
    private_home(stack.home)
    specs = plan_services(stack, insecure=insecure)
    if any(s.name == "gateway" for s in specs) and not insecure:
        ensure_admin_key(admin_key_path(stack.home))
    if any(s.name == "serve" for s in specs) and not local_model_installed(stack.home):
        tell(
            "installing the local model SmolLM2-135M-Instruct into "
            f"{stack.home / 'models'} (rllm-cli model install-local) ..."
        )
        install_local_model(stack.home)
    nodes = f"{stack.brokers} brokers" if stack.brokers > 1 else "one broker"
    tell(f"starting Kafka ({nodes}) on {stack.bootstrap_servers} ...")
    _broker(stack).start()
    stack.brokers_file.parent.mkdir(parents=True, exist_ok=True)
    stack.brokers_file.write_text(f"{stack.brokers}\n")
    created = ensure_topics(_kafka(stack), partitions=stack.partitions)
    for spec in specs:
        first_load = spec.name == "serve" and not hf_copy_complete(stack.home)
        tell(
            f"starting {spec.name}"
            + (
                " (first start: converting the GGUF and caching a copy, about a minute)"
                if first_load
                else ""
            )
            + " ..."
        )
        start_service(stack.home, spec)
    statuses = stack_status(stack)
    if created:
        statuses.append(
            ComponentStatus(
                "topics", True, stack.bootstrap_servers, "created " + ", ".join(created)
            )
        )
    return statuses


def stack_down(stack: StackSettings, purge: bool = False) -> None:
    """Stop everything ``up`` started (services first); ``purge`` deletes the broker's data."""
    for name in reversed(SERVICE_ORDER):
        stop_service(stack.home, name)
    _broker(stack).stop(purge=purge)
    if purge:
        stack.brokers_file.unlink(missing_ok=True)


def stack_status(stack: StackSettings) -> list[ComponentStatus]:
    """What runs, where it listens."""
    kafka = _kafka(stack)
    try:
        brokers = check_broker(kafka, timeout_s=3)
        topics = sorted(t for t in list_topics(kafka, timeout_s=5) if t.startswith("rllm."))
        statuses = [
            ComponentStatus(
                "kafka",
                True,
                stack.bootstrap_servers,
                f"{brokers} broker{'s' if brokers != 1 else ''} of {stack.brokers}, "
                f"{stack.replication_factor} replica(s) per topic, data {stack.kafka_data_dir}; "
                f"topics: {', '.join(topics) or 'none'}",
            )
        ]
    except KafkaUnavailableError:
        statuses = [ComponentStatus("kafka", False, stack.bootstrap_servers, "not running")]
    addresses = {
        "serve": f"http://127.0.0.1:{stack.serve_port}/v1",
        "gateway": f"http://127.0.0.1:{stack.gateway_port}",
        "processors": "-",
        "history": str(stack.home / "history"),
        "view": f"http://127.0.0.1:{stack.view_port}",
    }
    for name in SERVICE_ORDER:
        log = stack.home / "run" / f"{name}.log"
        if service_running(stack.home, name):
            statuses.append(ComponentStatus(name, True, addresses[name], f"log {log}"))
        elif log.exists():
            statuses.append(ComponentStatus(name, False, addresses[name], "stopped"))
    return statuses
