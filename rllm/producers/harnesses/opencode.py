"""The ``opencode`` harness (npm ``opencode-ai``): OpenAI chat through a custom
OpenAI-compatible provider (``rllm``), ``opencode run --format json`` with every
permission allowed.

Installed on the host with ``npm install --prefix <home>/opencode/<version>``; the package
ships opencode as one native executable (its platform package ``opencode-linux-x64``:
glibc only), whose folder is bound read-only into the sandbox. Its config
(``OPENCODE_CONFIG``) names the session's URL and key as the provider ``rllm``; the models
catalogue fetch, auto-update, sharing, default plugins, LSP downloads and the project's
own config are off, so the only traffic is the session's model calls.

``kilocode`` is a fork of it: the same config and switches under its own names.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from rllm.producers.harnesses.host import INSTRUCTION_ARGUMENT
from rllm.producers.harnesses.npm import NativeInstalled
from rllm.producers.harnesses.types import AgentSetup, HarnessApi, ModelEndpoint

__all__ = ["OPENCODE_CONFIG_PATH", "OpencodeHarness"]

VERSION = "1.18.33"
"""The pinned npm version."""

OPENCODE_CONFIG_PATH = "/rllm/opencode.json"
"""The run's config: the session as the provider ``rllm``."""

PROVIDER = "rllm"
"""The custom provider's id (``rllm/<model>``)."""


class OpencodeHarness(NativeInstalled):
    """``opencode run`` on the instruction, its JSON events kept as the agent's log."""

    name = "opencode"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "opencode-ai"
    native_package = "opencode"
    executable = "bin/opencode"
    version_env = {"OPENCODE_DISABLE_AUTOUPDATE": "1"}

    env_prefix = "OPENCODE"
    """The prefix of its environment variables (``<prefix>_CONFIG``, ``<prefix>_DISABLE_*``)."""
    config_path = OPENCODE_CONFIG_PATH
    """Where its config is written (``<prefix>_CONFIG``)."""
    config_schema = "https://opencode.ai/config.json"
    """The config's ``$schema``."""
    switches: Mapping[str, str] = {}
    """Variables set before the ``<prefix>_DISABLE_*`` ones (none of opencode's)."""
    disabled: tuple[str, ...] = (
        "MODELS_FETCH",
        "AUTOUPDATE",
        "SHARE",
        "DEFAULT_PLUGINS",
        "LSP_DOWNLOAD",
        "PROJECT_CONFIG",
        "CLAUDE_CODE",
        "EXTERNAL_SKILLS",
        "TERMINAL_TITLE",
    )
    """Its features turned off, each by ``<prefix>_DISABLE_<feature>=1``."""
    extra_config: Mapping[str, object] = {}
    """Config keys besides the provider, models, updates, sharing and permissions."""
    run_flags: tuple[str, ...] = ("run", "--format", "json")
    """Its subcommand and output format."""

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """Its config (the session as a provider) and the environment: where the config
        is, a writable home, and every switch that keeps it off the network but for the
        gateway."""
        prefix, state = self.env_prefix, self.state_dir
        env = {
            f"{prefix}_CONFIG": self.config_path,
            "HOME": state,
            "XDG_CONFIG_HOME": f"{state}/config",
            "XDG_DATA_HOME": f"{state}/data",
            "XDG_CACHE_HOME": f"{state}/cache",
            "XDG_STATE_HOME": f"{state}/state",
            **self.switches,
            **{f"{prefix}_DISABLE_{feature}": "1" for feature in self.disabled},
            "NO_PROXY": "*",
            "TERM": "dumb",
        }
        return AgentSetup(env=env, files={self.config_path: self._config(endpoint)})

    def _config(self, endpoint: ModelEndpoint) -> str:
        """The provider ``rllm`` (``@ai-sdk/openai-compatible``) at the session's URL with
        its key, its one model for every role, every permission allowed."""
        model = endpoint.model
        config = {
            "$schema": self.config_schema,
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "rllm gateway",
                    "options": {"baseURL": endpoint.base_url, "apiKey": endpoint.api_key},
                    "models": {model: {"name": model}},
                }
            },
            "model": f"{PROVIDER}/{model}",
            "small_model": f"{PROVIDER}/{model}",
            "autoupdate": False,
            "share": "disabled",
            **self.extra_config,
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        }
        return json.dumps(config, indent=2) + "\n"

    def command(self, workdir: str) -> str:
        """``<cli> run`` (``run_flags``: JSON events) from the workdir (a fixed title: no
        model call to make one), its events to the log, the log's end on stdout, its exit
        status kept."""
        argv = [self.executable_path, *self.run_flags, "--title", "rllm", "--dir", workdir]
        run = f"{shlex.join(argv)} {INSTRUCTION_ARGUMENT} </dev/null"
        return self.logged_command(run, workdir)
