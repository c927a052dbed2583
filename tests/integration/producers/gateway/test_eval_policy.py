"""An eval measures the policy it asks for (issue 38 item 3), through the real broker, the
gateway and the local model server: ``base`` is served for the eval and the trained policy
again afterwards; an unknown version is refused naming what there is, and a run training
against the stack refuses any switch, naming the run, before anything is published."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from rllm.app.evaluate import evaluate
from rllm.app.hold import pinning_evals, served_for, training_runs
from rllm.app.policy import parse_policy
from rllm.app.served import GatewayServes
from rllm.errors import ConfigError, RllmError
from rllm.kafka import EventPublisher, read_policy_log
from rllm.models.loading import load_model
from rllm.models.tiny import tiny_model_dir
from rllm.producers.evaluation import EvalConfig
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import SessionOpened, StepCaptured
from rllm.serving.app import create_app as serving_app
from rllm.serving.engine import Engine, SamplingParams
from rllm.serving.updates import PolicyFollower
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import until
from tests.integration.producers.gateway.fixtures import ADMIN, ADMIN_KEY, Events

GREEDY = SamplingParams(temperature=0, max_tokens=6)


@pytest.fixture
def stack(
    kafka: KafkaSettings,
    start_gateway: Callable[..., ThreadedServer],
    tiny_model: Path,
    tmp_path: Path,
) -> Iterator[tuple[ThreadedServer, Engine]]:
    """A gateway in front of the local model server (tiny), both following the test's
    ``rllm.policy-updates``, serving version 1 of run ``r`` (a checkpoint of other weights)."""
    engine = Engine(load_model(str(tiny_model)))
    follower = PolicyFollower(engine, kafka, poll_s=0.2).start()
    server = ThreadedServer(serving_app(engine, model_name="tiny"), lifespan="on")
    gw = start_gateway(upstream_url=server.url, follow_policy_updates=True)
    load_model(str(tiny_model_dir(tmp_path / "src", seed=7))).model.save_pretrained(
        tmp_path / "r" / "v000001"
    )
    with EventPublisher(kafka) as pub:
        pub.publish_sync(
            POLICY_UPDATES,
            "r",
            PolicyUpdated(
                event_id="r/v1",
                run_id="r",
                version=1,
                checkpoint_uri=(tmp_path / "r" / "v000001").as_uri(),
            ),
        )
    until("the gateway never served r v1", lambda: _stamped(gw) == ("r", 1))
    yield gw, engine
    server.stop()
    follower.stop()


def _stamped(gw: ThreadedServer) -> tuple[str, int]:
    info = httpx.get(f"{gw.url}/admin/policy", headers=ADMIN).json()
    return info["policy_run"] or "", info["policy_version"]


def _logprobs(engine: Engine) -> list[float]:
    (out,) = engine.generate([[5, 6, 7]], [GREEDY])
    return out.logprobs


def test_an_eval_of_base_measures_the_base_weights_then_the_trained_policy_is_back(
    stack: tuple[ThreadedServer, Engine],
    kafka: KafkaSettings,
    tiny_model: Path,
    session_events: Events,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gw, engine = stack
    trained = _logprobs(engine)
    base = _logprobs(Engine(load_model(str(tiny_model))))
    assert trained != base
    config = EvalConfig(
        benchmark="multiply",
        gateway_url=gw.url,
        model="tiny",
        admin_key=ADMIN_KEY,
        agent="chat",
        max_examples=2,
        run_id=f"eval-{uuid.uuid4().hex[:8]}",
        sampling={"max_tokens": 3, "temperature": 0.0},
    )
    summary = evaluate(config, "base", kafka, progress=lambda _o, _r: None)
    assert (summary.policy_version, summary.policy_run) == (0, None)
    assert summary.tasks == 2
    err = capsys.readouterr().err
    assert "serving the base weights for this eval (then run r version 1 again)" in err
    assert f"eval {config.run_id}: tiny serves policy version 0 (base weights) (--policy base)" in (
        err
    )
    # every step of the eval was sampled from the base weights
    opened = [e.payload for _k, e in session_events() if isinstance(e.payload, SessionOpened)]
    steps = [e.payload for _k, e in session_events() if isinstance(e.payload, StepCaptured)]
    assert len(opened) == 2 and len(steps) == 2
    assert {s.policy_version for s in steps} == {0}
    # and afterwards the stack serves what it served before, with those weights
    assert _stamped(gw) == ("r", 1)
    assert (engine.version, engine.policy_run) == (1, "r")
    assert _logprobs(engine) == trained
    log = read_policy_log(kafka)
    assert [(r.run_id, r.version) for r in log] == [("r", 1), ("", 0), ("r", 1)]


def test_latest_served_already_publishes_nothing(
    stack: tuple[ThreadedServer, Engine], kafka: KafkaSettings
) -> None:
    gw, _engine = stack
    with served_for(parse_policy("latest"), kafka, gw.url, ADMIN_KEY) as pointer:
        assert (pointer.run_id, pointer.version) == ("r", 1)
    assert len(read_policy_log(kafka)) == 1


def test_an_unknown_version_is_refused_naming_the_published_ones(
    stack: tuple[ThreadedServer, Engine], kafka: KafkaSettings
) -> None:
    gw, _engine = stack
    with (
        pytest.raises(
            ConfigError,
            match=r"policy r:7: run 'r' published no version 7 \(it has v1\); choose base, "
            r"latest, or RUN:VERSION of r: v1",
        ),
        served_for(parse_policy("r:7"), kafka, gw.url, ADMIN_KEY),
    ):
        pass
    assert len(read_policy_log(kafka)) == 1, "nothing was published"


def test_a_run_training_against_the_stack_refuses_a_switch_naming_it(
    stack: tuple[ThreadedServer, Engine], kafka: KafkaSettings
) -> None:
    gw, engine = stack
    trainer = GatewayServes(gw.url, "train-busy", kafka, ADMIN_KEY).start()
    try:
        # its consumer group has members once it joined
        until("the training run was never seen", lambda: training_runs(kafka) == ["train-busy"])
        with (
            pytest.raises(ConfigError) as refused,
            served_for(parse_policy("base"), kafka, gw.url, ADMIN_KEY),
        ):
            pass
    finally:
        trainer.close()
    assert "policy base: run train-busy is training against this stack" in str(refused.value)
    assert "Evaluate latest (what is served now), or after the run ends" in str(refused.value)
    assert [(r.run_id, r.version) for r in read_policy_log(kafka)] == [("r", 1)]
    assert (engine.version, engine.policy_run) == (1, "r")
    assert _stamped(gw) == ("r", 1)


def test_agent_trainer_evaluates_base_before_its_train_and_latest_after(
    stack: tuple[ThreadedServer, Engine], kafka: KafkaSettings
) -> None:
    """A fresh ``AgentTrainer``'s ``evaluate()`` is a baseline for its ``train()``: the base
    weights, not the policy an earlier run left served; after ``train()`` it measures
    ``latest``; ``policy=`` chooses."""
    import rllm
    from rllm.producers.sdk import RolloutConfig
    from rllm.schemas.types import Task

    gw, _engine = stack
    seen: list[tuple[str, int]] = []

    @rllm.rollout
    def agent(task: Task, config: RolloutConfig) -> str:
        client = config.openai_client()
        client.chat.completions.create(
            model=config.model, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        seen.append(_stamped(gw))
        return "x"

    trainer = rllm.AgentTrainer(
        agent,
        evaluator=rllm.evaluator(lambda _task, _outcome: 1.0),
        val_dataset=[Task(task_id="v1"), Task(task_id="v2")],
        config={"gateway_url": gw.url, "model": "tiny", "admin_key": ADMIN_KEY},
        kafka=kafka,
    )
    base = trainer.evaluate(progress=False)
    assert (base.policy_version, base.policy_run, base.tasks) == (0, None, 2)
    assert seen == [("", 0), ("", 0)]
    assert _stamped(gw) == ("r", 1), "the policy served before is served again"
    pinned = trainer.evaluate(progress=False, policy="r:1")
    assert (pinned.policy_version, pinned.policy_run) == (1, "r")
    trainer._trained = True  # what train() sets: its evaluate() then measures latest
    after = trainer.evaluate(progress=False)
    assert (after.policy_version, after.policy_run) == (1, "r")
    assert seen[2:] == [("r", 1)] * 4
    assert [(r.run_id, r.version) for r in read_policy_log(kafka)] == [("r", 1), ("", 0), ("r", 1)]


def test_a_policy_the_upstream_refuses_fails_the_eval_and_the_one_before_is_back(
    start_gateway: Callable[..., ThreadedServer], kafka: KafkaSettings, tmp_path: Path
) -> None:
    """An upstream that cannot go back to its start weights (vLLM, SGLang, a hosted API)
    refuses ``base`` with the reason; the eval fails with it, before any rollout, and the
    policy served before is published again."""
    gw = start_gateway(follow_policy_updates=True)  # policy_sync log: what the log names
    with EventPublisher(kafka) as pub:
        pub.publish_sync(
            POLICY_UPDATES,
            "r",
            PolicyUpdated(event_id="r/v1", run_id="r", version=1, checkpoint_uri=str(tmp_path)),
        )
    until("the gateway never served r v1", lambda: _stamped(gw) == ("r", 1))
    ran: list[str] = []
    with (
        pytest.raises(RllmError, match=r"did not load the base weights: .*restart it to serve"),
        served_for(parse_policy("base"), kafka, gw.url, ADMIN_KEY),
    ):
        ran.append("eval")
    assert ran == []
    assert [(r.run_id, r.version) for r in read_policy_log(kafka)] == [("r", 1), ("", 0), ("r", 1)]
    until("the gateway never served r v1 again", lambda: _stamped(gw) == ("r", 1))


def test_an_eval_holding_a_policy_refuses_another_evals_switch(
    stack: tuple[ThreadedServer, Engine], kafka: KafkaSettings
) -> None:
    """Two evals choosing at once would measure each other's policy: while one holds the
    stack, another's switch is refused naming the policy held; ``latest`` (no switch) is
    not."""
    gw, _engine = stack
    with served_for(parse_policy("base"), kafka, gw.url, ADMIN_KEY):
        until("the eval's hold was never seen", lambda: pinning_evals(kafka) == ["base"])
        with (
            pytest.raises(ConfigError, match=r"another eval has this stack serve policy base"),
            served_for(parse_policy("r:1"), kafka, gw.url, ADMIN_KEY),
        ):
            pass
        assert _stamped(gw) == ("", 0)
    assert _stamped(gw) == ("r", 1)
    until("the hold was never released", lambda: pinning_evals(kafka) == [])


def test_a_run_published_during_the_eval_is_left_served(
    stack: tuple[ThreadedServer, Engine], kafka: KafkaSettings, tiny_model: Path
) -> None:
    """A trainer that starts while an eval holds the stack announces its version 0; the
    eval ends without pointing the fleet back over it."""
    gw, _engine = stack
    with served_for(parse_policy("base"), kafka, gw.url, ADMIN_KEY), EventPublisher(kafka) as pub:
        pub.publish_sync(
            POLICY_UPDATES,
            "s",
            PolicyUpdated(
                event_id="s/v0", run_id="s", version=0, checkpoint_uri=tiny_model.as_uri()
            ),
        )
    until("the new run was never served", lambda: _stamped(gw) == ("s", 0))
    assert [(r.run_id, r.version) for r in read_policy_log(kafka)] == [("r", 1), ("", 0), ("s", 0)]
