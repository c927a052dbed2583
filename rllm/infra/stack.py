"""``rllm-cli up`` / ``down`` / ``status``: the local stack on the embedded defaults.

Kafka first (a real broker from ``infra/kafka``), its topics, then the services as
background ``rllm-cli`` processes: the local model server (when the model is local), the
gateway in front of the model, the stream processors and the history service.
"""

from __future__ import annotations

from dataclasses import dataclass

from rllm.errors import ConfigError, KafkaUnavailableError
from rllm.infra.broker import LocalBroker
from rllm.infra.services import ServiceSpec, service_running, start_service, stop_service
from rllm.kafka import check_broker, ensure_topics, make_admin
from rllm.settings import KafkaSettings, StackSettings

__all__ = ["ComponentStatus", "plan_services", "stack_down", "stack_status", "stack_up"]

SERVICE_ORDER = ("serve", "gateway", "processors", "history")


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


def _broker(stack: StackSettings) -> LocalBroker:
    return LocalBroker(stack.kafka_port, stack.kafka_data_dir, stack.kafka_heap)


def _kafka(stack: StackSettings) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=stack.bootstrap_servers)


def _wanted(stack: StackSettings) -> list[str]:
    names = [s.strip() for s in stack.services.split(",") if s.strip()]
    unknown = sorted(set(names) - set(SERVICE_ORDER))
    if unknown:
        raise ConfigError(
            f"unknown service(s) {', '.join(unknown)} in RLLM_SERVICES / --services; "
            f"known: {', '.join(SERVICE_ORDER)}"
        )
    return [s for s in SERVICE_ORDER if s in names]


def plan_services(stack: StackSettings) -> list[ServiceSpec]:
    """The services ``up`` starts, in order, with their commands and health URLs."""
    from rllm.models.config import PROVIDERS, ModelProfile, Provider, load_config

    config = load_config()
    name = stack.model or config.active
    if name is None or (name == "local" and "local" not in config.profiles):
        local = PROVIDERS[Provider.LOCAL]
        profile = ModelProfile(
            name="local",
            provider=Provider.LOCAL,
            model=local.model,
            base_url=f"http://127.0.0.1:{stack.serve_port}/v1",
        )
    else:
        profile = config.get(name)
    local_model = profile.provider is Provider.LOCAL
    kind = {Provider.LOCAL: "vllm", Provider.VLLM: "vllm", Provider.SGLANG: "sglang"}.get(
        profile.provider, "hosted"
    )
    upstream = f"http://127.0.0.1:{stack.serve_port}" if local_model else profile.base_url
    env = {"RLLM_BOOTSTRAP_SERVERS": stack.bootstrap_servers}
    specs = {
        "serve": ServiceSpec(
            "serve",
            ("serve", "--port", str(stack.serve_port), "--served-model-name", profile.model),
            health_url=f"http://127.0.0.1:{stack.serve_port}/health",
            env=env,
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
                "--spool-dir",
                str(stack.home / "gateway-spool"),
            ),
            health_url=f"http://127.0.0.1:{stack.gateway_port}/health",
            env=env,
        ),
        "processors": ServiceSpec("processors", ("process",), env=env),
        "history": ServiceSpec(
            "history", ("history", "--history-dir", str(stack.home / "history")), env=env
        ),
    }
    wanted = _wanted(stack)
    return [specs[s] for s in wanted if s != "serve" or local_model]


def stack_up(stack: StackSettings) -> list[ComponentStatus]:
    """Start the broker, create every topic, start the services; idempotent.

    Raises:
        InfraError: with the log's tail when a piece does not start.
    """
    _broker(stack).start()
    created = ensure_topics(_kafka(stack), partitions=stack.partitions)
    for spec in plan_services(stack):
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


def stack_status(stack: StackSettings) -> list[ComponentStatus]:
    """What runs, where it listens."""
    kafka = _kafka(stack)
    try:
        brokers = check_broker(kafka, timeout_s=3)
        topics = sorted(
            t for t in make_admin(kafka).list_topics(timeout=5).topics if t.startswith("rllm.")
        )
        statuses = [
            ComponentStatus(
                "kafka",
                True,
                stack.bootstrap_servers,
                f"{brokers} broker, data {stack.kafka_data_dir}; "
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
    }
    for name in SERVICE_ORDER:
        log = stack.home / "run" / f"{name}.log"
        if service_running(stack.home, name):
            statuses.append(ComponentStatus(name, True, addresses[name], f"log {log}"))
        elif log.exists():
            statuses.append(ComponentStatus(name, False, addresses[name], "stopped"))
    return statuses
