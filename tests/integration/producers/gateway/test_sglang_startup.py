"""An sglang upstream's tokenizer is loaded when the gateway starts (issue 17, defect 7): a
first request never waits for it, a start with a tokenizer that cannot load fails naming it,
and ``rllm-cli gateway`` takes it (and the upstream timeout) as flags; ``n`` samples from
``/generate``, streamed or not, are each captured."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.errors import ConfigError
from rllm.producers.gateway import GatewaySettings, create_app
from rllm.settings import KafkaSettings
from tests.fakes.upstream import RunningUpstream, ThreadedServer
from tests.integration.producers.gateway.clients import openai_client
from tests.integration.producers.gateway.fixtures import Events, session_steps


def test_the_tokenizer_is_loaded_at_start_not_on_the_first_request(
    start_sglang_gateway: Callable[..., ThreadedServer],
    upstream: RunningUpstream,
    tiny_tokenizer: Path,
) -> None:
    gw = start_sglang_gateway()
    shutil.rmtree(tiny_tokenizer)  # gone before the first request: it was read at start
    with openai_client(gw.url, "first") as client:
        messages: Any = [{"role": "user", "content": "hello world"}]
        reply = client.chat.completions.create(model="m", messages=messages)
    assert reply.choices[0].message.content == "ok done"
    assert upstream.state.requests[-1]["input_ids"] == [2, 4, 7, 8, 3, 2, 5]


def test_a_tokenizer_that_cannot_load_fails_the_start_naming_it(
    kafka: KafkaSettings, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-tokenizer"
    base: dict[str, Any] = {"upstream_kind": "sglang", "insecure": True}
    with pytest.raises(ConfigError, match="no-such-tokenizer") as failed:
        create_app(GatewaySettings(**base, tokenizer=str(missing)), kafka)
    assert "--tokenizer" in str(failed.value)
    with pytest.raises(ConfigError, match="needs the model's tokenizer"):
        create_app(GatewaySettings(**base), kafka)


def test_the_cli_takes_the_tokenizer_and_the_upstream_timeout(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tokenizer"
    flags = ["gateway", "--insecure", "--upstream-kind", "sglang", "--spool-dir", str(tmp_path)]
    result = CliRunner().invoke(cli, [*flags, "--tokenizer", str(missing)])
    assert result.exit_code == 1, result.output
    assert f"cannot load the tokenizer '{missing}'" in result.output
    timed = CliRunner().invoke(cli, [*flags, "--tokenizer", "x", "--upstream-timeout", "-1"])
    assert timed.exit_code == 2, timed.output
    assert timed.output == (
        "error: invalid settings: --upstream-timeout: Input should be greater than 0 (got -1.0)\n"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_n_samples_from_generate_are_each_captured(
    stream: bool,
    start_sglang_gateway: Callable[..., ThreadedServer],
    session_events: Events,
    upstream: RunningUpstream,
) -> None:
    gw = start_sglang_gateway()
    messages: Any = [{"role": "user", "content": "hello world"}]
    with openai_client(gw.url, "n2") as client:
        made = client.chat.completions.create(model="m", messages=messages, n=2, stream=stream)
        if stream:
            texts = ["", ""]
            for chunk in made:
                for choice in chunk.choices:
                    texts[choice.index] += choice.delta.content or ""
        else:
            texts = [c.message.content or "" for c in made.choices]
    assert texts == ["ok done", "ok done"]
    assert upstream.state.requests[-1]["sampling_params"] == {"n": 2}
    steps = session_steps(session_events, "n2")
    assert [s.step_index for s in steps] == [0, 1]
    # sample j answers the prompt's last ID (5: assistant) + 1 + j, + 2 + j, then 2
    assert [s.response_ids.tolist() for s in steps] == [[6, 7, 2], [7, 8, 2]]
    assert steps[1].logprobs.tolist() == pytest.approx([-0.1, -0.15, -0.2])
    assert steps[1].parent_step_id == steps[0].step_id
    assert steps[0].usage.completion_tokens == 6 and steps[1].usage.completion_tokens == 0
