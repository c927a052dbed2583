"""Secure by default: the stack's admin key file, the order clients resolve a key in, the
gateway refusing to start without a key unless insecure, and what ``up`` starts."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from rllm.errors import ConfigError
from rllm.infra.admin_key import admin_key_path, ensure_admin_key, read_admin_key, resolve_admin_key
from rllm.infra.stack import plan_services
from rllm.producers.gateway import GatewaySettings, create_app
from rllm.producers.sdk import GatewayClient
from rllm.settings import KafkaSettings, StackSettings


def test_the_key_is_generated_once_0600_and_read_back(tmp_path: Path) -> None:
    path = admin_key_path(tmp_path)
    assert path == tmp_path / "gateway" / "admin-key"
    assert read_admin_key(path) is None
    key = ensure_admin_key(path)
    assert key.startswith("rllm-ak-") and len(key) > 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_admin_key(path) == key == read_admin_key(path)
    assert ensure_admin_key(admin_key_path(tmp_path / "other")) != key


def test_a_key_file_others_may_read_is_refused_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "admin-key"
    path.write_text("k\n")
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mode 644.*chmod 600"):
        read_admin_key(path)
    path.chmod(0o600)
    path.write_text("  \n")
    with pytest.raises(ConfigError, match="is empty"):
        read_admin_key(path)


def test_explicit_beats_env_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLLM_HOME", str(tmp_path))
    monkeypatch.delenv("RLLM_ADMIN_KEY", raising=False)
    assert resolve_admin_key() is None
    stored = ensure_admin_key(admin_key_path())
    assert resolve_admin_key() == stored
    monkeypatch.setenv("RLLM_ADMIN_KEY", "from-env")
    assert resolve_admin_key() == "from-env"
    assert resolve_admin_key("explicit") == "explicit"


async def test_the_sdk_client_sends_the_stored_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLLM_HOME", str(tmp_path))
    monkeypatch.delenv("RLLM_ADMIN_KEY", raising=False)
    stored = ensure_admin_key(admin_key_path())
    client = GatewayClient("http://127.0.0.1:1")
    try:
        assert client._http.headers["authorization"] == f"Bearer {stored}"
    finally:
        await client.aclose()


def test_the_gateway_refuses_to_start_without_a_key_unless_insecure() -> None:
    kafka = KafkaSettings()
    with pytest.raises(ConfigError, match=r"needs an admin key.*--insecure"):
        create_app(GatewaySettings(), kafka)
    create_app(GatewaySettings(insecure=True), kafka)
    create_app(GatewaySettings(admin_key="k"), kafka)
    with pytest.raises(ValidationError, match="the admin key is empty"):
        GatewaySettings(admin_key=" ")


def test_up_starts_the_gateway_with_the_stack_key_file_or_insecure(tmp_path: Path) -> None:
    stack = StackSettings(home=tmp_path, services="gateway", model="local")
    (gateway,) = [s for s in plan_services(stack) if s.name == "gateway"]
    i = gateway.args.index("--admin-key-file")
    assert gateway.args[i + 1] == str(tmp_path / "gateway" / "admin-key")
    assert "--insecure" not in gateway.args
    assert not any("rllm-ak-" in a for a in gateway.args)  # the key is never on a command line
    (open_gateway,) = [s for s in plan_services(stack, insecure=True) if s.name == "gateway"]
    assert "--insecure" in open_gateway.args and "--admin-key-file" not in open_gateway.args
