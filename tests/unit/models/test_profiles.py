"""Model profiles: file mode 0600, key resolution (env over file), masking, CLI flows."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.models import profiles
from rllm.models.profiles import PROVIDERS, ModelConfigError, ModelProfile, Provider, UserConfig

SECRET = "sk-proj-abcdefghijklmnop1234"


def test_config_path_follows_env(config_dir: Path) -> None:
    assert profiles.config_path() == config_dir / "models.json"


def test_save_writes_0600_and_round_trips_with_the_key(config_dir: Path) -> None:
    profile = ModelProfile(
        name="o",
        provider=Provider.OPENAI,
        model="gpt-4o-mini",
        base_url="https://api.openai.com/v1",
        api_key_env="OPENAI_API_KEY",
        api_key=SECRET,
    )
    path = profiles.save_config(UserConfig(active="o", profiles={"o": profile}))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    loaded = profiles.load_config()
    assert loaded.get().api_key is not None
    assert loaded.get().api_key.get_secret_value() == SECRET  # type: ignore[union-attr]  # the line above: it is not None
    assert SECRET not in repr(loaded)


def test_env_key_wins_over_file_key(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = ModelProfile(
        name="o",
        provider=Provider.OPENAI,
        model="m",
        base_url="u",
        api_key_env="OPENAI_API_KEY",
        api_key="sk-file-key-000000",
    )
    assert profiles.resolve_api_key(profile) == ("sk-file-key-000000", "file")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-1111111")
    assert profiles.resolve_api_key(profile) == ("sk-env-key-1111111", "env OPENAI_API_KEY")


def test_mask_key() -> None:
    assert profiles.mask_key(SECRET) == "sk-…1234"
    assert profiles.mask_key("short") == "****" and profiles.mask_key(None) == "-"


def test_unknown_profile_and_bad_file(config_dir: Path) -> None:
    with pytest.raises(ModelConfigError, match="model setup"):
        profiles.load_config().get()
    config_dir.mkdir(parents=True)
    (config_dir / "models.json").write_text("{not json")
    with pytest.raises(ModelConfigError, match="not a valid model configuration"):
        profiles.load_config()


def test_every_provider_has_defaults() -> None:
    assert {p.value for p in PROVIDERS} == {
        "local",
        "vllm",
        "sglang",
        "openai",
        "anthropic",
        "openai-compatible",
    }
    assert PROVIDERS[Provider.ANTHROPIC].api == "anthropic"


def test_cli_setup_with_flags_show_masks_and_swap(config_dir: Path) -> None:
    runner = CliRunner()
    local = runner.invoke(cli, ["model", "setup", "--provider", "local", "--no-input"])
    assert local.exit_code == 0, local.output
    made = runner.invoke(
        cli,
        [
            "model",
            "setup",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--api-key",
            SECRET,
            "--no-input",
        ],
    )
    assert made.exit_code == 0, made.output
    shown = runner.invoke(cli, ["model", "show", "--json"])
    assert SECRET not in shown.output
    data = json.loads(shown.output)
    assert data["active"] == "openai"
    rows = {r["name"]: r for r in data["profiles"]}
    assert rows["openai"]["api_key"] == "sk-…1234" and rows["openai"]["key_source"] == "file"
    assert rows["local"]["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    table = runner.invoke(cli, ["model", "show"])
    assert table.exit_code == 0 and SECRET not in table.output and "gpt-4o" in table.output
    swapped = runner.invoke(cli, ["model", "swap", "local"])
    assert swapped.exit_code == 0 and profiles.load_config().active == "local"
    missing = runner.invoke(cli, ["model", "swap", "nope"])
    assert missing.exit_code == 1 and "known: local, openai" in missing.output


def test_cli_setup_interactive_prompts() -> None:
    answers = "openai-compatible\nhttp://127.0.0.1:9999/v1\nmy-model\n\n"
    result = CliRunner().invoke(
        cli, ["model", "setup", "--name", "mine", "--interactive"], input=answers
    )
    assert "Provider" in result.output and "Base URL" in result.output
    assert result.exit_code == 0, result.output
    profile = profiles.load_config().get("mine")
    assert (profile.provider, profile.base_url, profile.model) == (
        Provider.OPENAI_COMPATIBLE,
        "http://127.0.0.1:9999/v1",
        "my-model",
    )
    assert profile.api_key_env == "OPENAI_API_KEY"


def test_cli_setup_refuses_missing_base_url() -> None:
    result = CliRunner().invoke(
        cli, ["model", "setup", "--provider", "openai-compatible", "--no-input"]
    )
    assert result.exit_code == 1 and "needs --base-url" in result.output


def test_cli_setup_interactive_hidden_key_is_stored_but_never_shown() -> None:
    answers = f"anthropic\n\n\n{SECRET}\n"
    result = CliRunner().invoke(cli, ["model", "setup", "--interactive"], input=answers)
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output  # typed with hidden input, never echoed
    profile = profiles.load_config().get("anthropic")
    assert profile.api == "anthropic" and profile.base_url == "https://api.anthropic.com/v1"
    assert profiles.resolve_api_key(profile) == (SECRET, "file")
    shown = CliRunner().invoke(cli, ["model", "show"])
    assert SECRET not in shown.output and "sk-…1234" in shown.output
