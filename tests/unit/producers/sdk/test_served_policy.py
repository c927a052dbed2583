"""``served_policy`` / ``check_served``: what the gateway's upstream serves, asked before an
eval (gateway answers faked with ``httpx.MockTransport``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rllm.errors import ConfigError
from rllm.producers.evaluation.served import ServedPolicy, check_served, served_policy

URL = "http://127.0.0.1:8400"


def _gateway(policy: dict[str, Any], models: tuple[str, ...] = ("SmolLM2",)) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("authorization") == "Bearer k"
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": m} for m in models]})
        if request.url.path == "/admin/policy":
            return httpx.Response(200, json=policy)
        return httpx.Response(404, json={})

    return httpx.MockTransport(handle)


async def test_the_version_the_model_server_loaded_wins_over_the_gateways_stamp() -> None:
    """The gateway read version 36 from the log; the server could not load it and serves
    run a's version 3: the eval is of version 3."""
    policy = {
        "policy_version": 36,
        "policy_run": "perf",
        "upstream_policy_version": 3,
        "upstream_policy_run": "a",
    }
    served = await served_policy(URL, "k", _gateway(policy))
    assert served == ServedPolicy(("SmolLM2",), 3, "a")


async def test_an_upstream_that_reports_no_version_gets_the_gateways() -> None:
    policy = {"policy_version": 5, "policy_run": "b", "upstream_policy_version": None}
    served = await served_policy(URL, "k", _gateway(policy, ("m1", "m2")))
    assert served == ServedPolicy(("m1", "m2"), 5, "b")
    check_served(served, "m2", URL)


def test_a_model_the_upstream_does_not_list_is_refused_with_both_names() -> None:
    served = ServedPolicy(("HuggingFaceTB/SmolLM2-135M-Instruct",), 0, None)
    with pytest.raises(ConfigError) as info:
        check_served(served, "fake-model", URL)
    text = str(info.value)
    assert "'fake-model' is not what the gateway at http://127.0.0.1:8400 serves" in text
    assert "lists HuggingFaceTB/SmolLM2-135M-Instruct" in text and "up --model" in text


async def test_a_gateway_that_refuses_the_listing_is_an_error_naming_the_status() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(401, json={"error": "key"}))
    with pytest.raises(ConfigError, match=r"answered GET /v1/models with 401"):
        await served_policy(URL, None, transport)


async def test_an_unreachable_gateway_is_an_error_naming_it() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(
        ConfigError, match=r"the gateway at http://127.0.0.1:8400 does not answer .*`rllm-cli up`"
    ):
        await served_policy(URL, None, httpx.MockTransport(refuse))
