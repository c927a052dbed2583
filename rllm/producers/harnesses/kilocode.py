"""The ``kilocode`` harness (npm ``@kilocode/cli``, an opencode fork): OpenAI chat through a
custom OpenAI-compatible provider (``rllm``), ``kilo run --auto --format json`` with every
permission allowed.

Installed on the host with ``npm install --prefix <home>/kilocode/<version>``; the package
ships Kilo as one native executable (its platform package ``@kilocode/cli-linux-x64``:
glibc only), whose folder is bound read-only into the sandbox. Its config
(``KILO_CONFIG``) names the session's URL and key as the provider ``rllm``, the only one
enabled; the models catalogue fetch, auto-update, the daemon, sharing and session ingest,
PostHog telemetry (``KILO_TELEMETRY_LEVEL``), OpenTelemetry, default plugins, LSP
downloads and the project's own config are off, so the only traffic is the session's model
calls; a failed call is retried once (``KILO_SESSION_RETRY_LIMIT``), so an unreachable
gateway ends the run instead of Kilo waiting for the network until the timeout.

Everything but those names and switches is opencode's (``OpencodeHarness``).
"""

from __future__ import annotations

from rllm.producers.harnesses.opencode import PROVIDER, OpencodeHarness

__all__ = ["KILO_CONFIG_PATH", "KilocodeHarness"]

VERSION = "7.7.7"
"""The pinned npm version: the newest whose platform package (``@kilocode/cli-linux-x64``)
the npm registry reached from these machines serves alongside it (it has no 7.8.1 build
of ``@kilocode/cli-linux-x64``, so 7.8.1's postinstall fails)."""

KILO_CONFIG_PATH = "/rllm/kilo.json"
"""The run's config: the session as the provider ``rllm``."""


class KilocodeHarness(OpencodeHarness):
    """``kilo run --auto`` on the instruction, its JSON events kept as the agent's log."""

    name = "kilocode"
    version = VERSION
    package = "@kilocode/cli"
    native_package = "@kilocode/cli"
    executable = "bin/kilo"
    version_env = {
        "KILO_DISABLE_AUTOUPDATE": "1",
        "KILO_NO_DAEMON": "1",
        "KILO_TELEMETRY_LEVEL": "off",
    }

    env_prefix = "KILO"
    config_path = KILO_CONFIG_PATH
    config_schema = "https://app.kilo.ai/config.json"
    switches = {
        "KILO_AUTH_CONTENT": "{}",
        "KILO_TELEMETRY_LEVEL": "off",
        "KILO_NO_DAEMON": "1",
        "KILO_PURE": "1",
        "KILO_SESSION_RETRY_LIMIT": "1",
    }
    disabled = (*OpencodeHarness.disabled, "SESSION_INGEST")  # kilo also uploads sessions
    extra_config = {
        "enabled_providers": [PROVIDER],
        "snapshot": False,  # no workspace snapshots: nothing to undo in a run
        "experimental": {"openTelemetry": False},
    }
    run_flags = ("run", "--auto", "--format", "json")
