"""Which policy an eval measures (issue 38 item 3): ``base``, ``latest`` or ``RUN:VERSION``
are read from ``rllm.policy-updates``, a name that was never published (or whose checkpoint
is gone) is refused naming what there is, the records an eval publishes move the lineage
rule to the choice and back, and the model server can serve its base weights again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rllm.app.policy import (
    PolicyChoice,
    current_pointer,
    parse_policy,
    resolve_policy,
)
from rllm.errors import ConfigError
from rllm.models.loading import load_model
from rllm.models.tiny import tiny_model_dir
from rllm.schemas.lineage import BASE, PolicyPointer, advance, base_record, switch_records
from rllm.schemas.policy import PolicyUpdated
from rllm.serving.engine import Engine, SamplingParams
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(run: str, version: int, minute: int = 0, uri: str = "") -> PolicyUpdated:
    return PolicyUpdated(
        event_id=f"{run}/v{version}",
        run_id=run,
        version=version,
        checkpoint_uri=uri or f"file:///ckpt/{run}/v{version:06d}",
        created_at=T0 + timedelta(minutes=minute),
    )


def everywhere(_r: PolicyUpdated) -> bool:
    return True


def is_base(r: PolicyUpdated) -> bool:
    return (r.run_id, r.version, r.checkpoint_uri, r.event_id) == ("", 0, "", "base/v0")


# --- parsing -------------------------------------------------------------------------


def test_parse_policy_takes_base_latest_and_run_version() -> None:
    assert parse_policy("base") == PolicyChoice("base")
    assert parse_policy("latest") == PolicyChoice("latest")
    assert parse_policy("train-1a:3") == PolicyChoice("train-1a:3", PolicyPointer("train-1a", 3))
    # a run id may hold ':' (the version is after the last one)
    assert parse_policy("a:b:12").pointer == PolicyPointer("a:b", 12)


@pytest.mark.parametrize("bad", ["", "newest", "run", "run:", "run:v3", ":3", "run:-1"])
def test_parse_policy_refuses_anything_else_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError, match=rf"policy {bad!r} is not base, latest or RUN:VERSION"):
        parse_policy(bad)


# --- resolving against the log --------------------------------------------------------

LOG = [rec("a", 0, 0), rec("a", 1, 1), rec("a", 2, 2), rec("b", 0, 3), rec("b", 1, 4)]


def test_base_is_the_base_record_whatever_the_log_holds() -> None:
    assert is_base(resolve_policy(parse_policy("base"), LOG, everywhere))
    assert PolicyPointer.of(base_record()) == BASE == PolicyPointer("", 0)


def test_latest_is_the_training_record_created_last_not_the_last_in_the_log() -> None:
    # an eval that pinned a:1 republished its record (created at minute 1) after b's
    log = [*LOG, base_record(), rec("a", 1, 1)]
    assert PolicyPointer.of(resolve_policy(parse_policy("latest"), log, everywhere)) == (
        PolicyPointer("b", 1)
    )
    assert is_base(resolve_policy(parse_policy("latest"), [], everywhere))
    assert is_base(resolve_policy(parse_policy("latest"), [base_record()], everywhere))


def test_run_version_is_that_versions_record() -> None:
    got = resolve_policy(parse_policy("a:1"), LOG, everywhere)
    assert got == LOG[1]


def test_an_unknown_run_is_refused_listing_the_runs_and_versions_there_are() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_policy(parse_policy("c:1"), LOG, everywhere)
    assert str(err.value) == (
        "policy c:1: no run 'c' published a policy; choose base, latest, or RUN:VERSION of "
        "a: v0, v1, v2; b: v0, v1"
    )


def test_an_unknown_version_is_refused_listing_the_runs_versions() -> None:
    with pytest.raises(ConfigError, match=r"run 'a' published no version 7 \(it has v0, v1, v2\)"):
        resolve_policy(parse_policy("a:7"), LOG, everywhere)


def test_a_pruned_checkpoint_is_refused_and_left_out_of_the_choices(tmp_path: Path) -> None:
    kept = tmp_path / "a" / "v000002"
    kept.mkdir(parents=True)
    log = [rec("a", 1, 1, (tmp_path / "a" / "v000001").as_uri()), rec("a", 2, 2, kept.as_uri())]
    with pytest.raises(ConfigError) as err:
        resolve_policy(parse_policy("a:1"), log)
    assert "run 'a' version 1's checkpoint" in str(err.value)
    assert "is gone (pruned?)" in str(err.value)
    assert str(err.value).endswith("choose base, latest, or RUN:VERSION of a: v2")
    assert resolve_policy(parse_policy("a:2"), log) == log[1]
    with pytest.raises(ConfigError, match=r"no training run's checkpoint can be served"):
        resolve_policy(parse_policy("z:0"), log[:1])


# --- the records that move the fleet ---------------------------------------------------


def _follow(current: PolicyPointer | None, records: list[PolicyUpdated]) -> PolicyPointer:
    """What the model server and the gateway serve after reading ``records``."""
    pointer = current
    for r in records:
        pointer = advance(pointer, r)
    return pointer or BASE


@pytest.mark.parametrize(
    ("current", "target", "published"),
    [
        (None, base_record(), 0),  # nothing published: the base weights are served
        (PolicyPointer("a", 2), rec("a", 2), 0),  # served already
        (PolicyPointer("a", 2), base_record(), 1),
        (None, rec("a", 1), 1),
        (PolicyPointer("b", 1), rec("a", 1), 1),  # another run takes over
        (PolicyPointer("a", 1), rec("a", 2), 1),  # a newer version of the run counts
        (PolicyPointer("a", 2), rec("a", 1), 2),  # an older one needs the base record first
        (BASE, rec("a", 0), 1),
    ],
)
def test_switch_records_point_the_lineage_rule_at_the_target(
    current: PolicyPointer | None, target: PolicyUpdated, published: int
) -> None:
    records = switch_records(current, target)
    assert len(records) == published
    assert _follow(current, records) == PolicyPointer.of(target)
    # and back again, from the target to what was served before
    before = base_record() if current in (None, BASE) else rec(current.run_id, current.version)
    assert _follow(PolicyPointer.of(target), switch_records(PolicyPointer.of(target), before)) == (
        current or BASE
    )


def test_current_pointer_follows_the_log() -> None:
    assert current_pointer([]) is None
    assert current_pointer(LOG) == PolicyPointer("b", 1)
    assert current_pointer([*LOG, rec("a", 1, 1)]) == PolicyPointer("a", 1)
    assert current_pointer([*LOG, rec("b", 0)]) == PolicyPointer("b", 1)
    assert current_pointer([*LOG, base_record()]) == BASE


# --- the model server serves its base weights again ---------------------------------------

GREEDY = SamplingParams(temperature=0, max_tokens=6)


def _logprobs(engine: Engine) -> list[float]:
    (out,) = engine.generate([[5, 6, 7]], [GREEDY])
    return out.logprobs


def _trained(engine: Engine, directory: Path) -> str:
    """A checkpoint of the engine's model with other weights (an HF directory)."""
    other = load_model(str(tiny_model_dir(directory / "src", seed=7)))
    other.model.save_pretrained(directory / "ckpt")
    return (directory / "ckpt").as_uri()


@pytest.mark.parametrize("keep_copy", [False, True], ids=["hf-source", "kept-copy"])
def test_the_engine_loads_its_base_weights_again(
    tiny_model: Path, tmp_path: Path, keep_copy: bool
) -> None:
    engine = Engine(load_model(str(tiny_model)))
    if keep_copy:  # a GGUF source cannot be read as safetensors: the weights are kept
        engine.source = str(tmp_path / "model.gguf")
    base = _logprobs(engine)
    engine.load_checkpoint(_trained(engine, tmp_path), 3, "r")
    assert (engine.version, engine.policy_run) == (3, "r")
    assert _logprobs(engine) != base
    engine.load_base()
    assert (engine.version, engine.policy_run) == (0, "")
    assert _logprobs(engine) == base


def test_the_server_follower_serves_base_weights_on_the_base_record(
    tiny_model: Path, tmp_path: Path
) -> None:
    engine = Engine(load_model(str(tiny_model)))
    base = _logprobs(engine)
    follower = PolicyFollower(engine, KafkaSettings())  # not started: records are handed in
    trained = rec("r", 2, uri=_trained(engine, tmp_path))
    follower._on_updates([trained], True)
    assert (engine.version, engine.policy_run, follower.loaded) == (2, "r", PolicyPointer("r", 2))
    follower._on_updates([base_record()], True)
    assert (engine.version, engine.policy_run, follower.loaded) == (0, "", BASE)
    assert _logprobs(engine) == base
    assert [v for v, _ in follower.reloads] == [2, 0]
    assert follower.errors == []


def test_a_base_record_on_a_fresh_server_loads_nothing(tiny_model: Path) -> None:
    engine = Engine(load_model(str(tiny_model)))
    follower = PolicyFollower(engine, KafkaSettings())
    follower._on_updates([base_record()], True)
    assert follower.reloads == [] and (engine.version, engine.policy_run) == (0, "")


def test_vllm_and_sglang_refuse_the_base_record_with_the_reason() -> None:
    from rllm.producers.gateway.settings import GatewaySettings
    from rllm.producers.gateway.sync import PolicyLoadRefused, checkpoint_of

    with pytest.raises(PolicyLoadRefused, match=r"base weights.*restart it to serve them"):
        checkpoint_of(base_record(), GatewaySettings(insecure=True))


# --- the CLI ------------------------------------------------------------------------------


def test_eval_refuses_a_bad_policy_before_anything_runs() -> None:
    from rllm.cli.main import cli

    result = CliRunner().invoke(
        cli, ["eval", "multiply", "--policy", "newest", "--gateway-url", "http://127.0.0.1:9"]
    )
    assert result.exit_code != 0
    assert "policy 'newest' is not base, latest or RUN:VERSION" in result.output


def test_a_kept_copy_is_a_copy(tiny_model: Path, tmp_path: Path) -> None:
    """The kept base weights do not alias the live ones (a reload would change them)."""
    engine = Engine(load_model(str(tiny_model)))
    engine.source = str(tmp_path / "model.gguf")
    engine.load_checkpoint(_trained(engine, tmp_path), 1, "r")
    assert engine._base is not None
    live = dict(engine.model.named_parameters())
    name = next(iter(live))
    assert not torch.equal(engine._base[name], live[name])
