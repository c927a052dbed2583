"""docker-compose.yml, rendered as compose reads it (YAML anchors and merges): every
``RLLM_*`` variable a service sets is one a settings class reads, every published port is
bound to loopback unless ``RLLM_BIND`` says otherwise, and the image has what the
services need. (This machine has no compose plugin: the file is checked as data.)"""

from __future__ import annotations

import importlib
import re
from typing import Any

import yaml
from pydantic_settings import BaseSettings

from rllm.settings import env_var
from tests.paths import ROOT

SETTINGS_MODULES = (
    "rllm.settings",
    "rllm.processors.settings",
    "rllm.consumers.history.settings",
    "rllm.consumers.trainer.settings",
    "rllm.producers.gateway.settings",
    "rllm.serving.settings",
    "rllm.sandboxes.settings",
    "rllm.benchmarks.loaders",
    "rllm.benchmarks.graders.judge",
    "rllm.benchmarks.graders.sandbox",
)


def _read_variables() -> set[str]:
    """Every environment variable a settings class of the project reads."""
    names: set[str] = set()
    for module_name in SETTINGS_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseSettings)
                and value is not BaseSettings
            ):
                names |= {env_var(value, field) for field in value.model_fields}
    return names


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_every_rllm_variable_a_service_sets_is_read_by_a_settings_class() -> None:
    read = _read_variables()
    assert {"RLLM_GATEWAY_UPSTREAM_URL", "RLLM_BOOTSTRAP_SERVERS"} <= read
    services = _compose()["services"]
    unread = {
        f"{name}: {var}"
        for name, service in services.items()
        for var in (service.get("environment") or {})
        if var.startswith("RLLM_") and var not in read
    }
    assert unread == set(), "set by compose but read by no settings class"


def test_published_ports_are_loopback_by_default_and_secrets_are_required() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for port in service.get("ports") or []:
            assert str(port).startswith("${RLLM_BIND:-127.0.0.1}:"), f"{name} publishes {port}"
    gateway = services["gateway"]["environment"]
    assert gateway["RLLM_GATEWAY_ADMIN_KEY"].startswith("${RLLM_ADMIN_KEY:?")
    assert services["clickhouse"]["environment"]["CLICKHOUSE_PASSWORD"].startswith(
        "${RLLM_CLICKHOUSE_PASSWORD:?"
    )
    assert gateway["RLLM_GATEWAY_UPSTREAM_URL"] == "${RLLM_UPSTREAM_URL:-http://serve:8001}"


def test_the_stack_has_every_service_it_needs_in_order() -> None:
    compose = _compose()
    services = compose["services"]
    assert {"kafka", "topics", "serve", "gateway", "processors", "history", "trainer"} <= set(
        services
    )
    assert services["kafka"]["healthcheck"]["test"][0] == "CMD-SHELL"
    assert services["topics"]["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    assert services["gateway"]["depends_on"]["topics"] == {
        "condition": "service_completed_successfully"
    }
    extras = services["gateway"]["build"]["args"]["EXTRAS"].split(",")
    assert {"gateway", "clickhouse", "eval", "train"} <= set(extras)  # math rewards, serve
    commands = {name: s.get("command", [None])[0] for name, s in services.items()}
    assert (commands["serve"], commands["trainer"], commands["history"]) == (
        "serve",
        "train",
        "history",
    )
    arg = re.search(r"^ARG EXTRAS=(.+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert arg is not None and "eval" in arg.group(1).split(",")
