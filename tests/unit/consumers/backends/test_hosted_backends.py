"""The hosted backends through their official SDKs (``tinker``, ``fireworks-ai``), each
against a fake service on a loopback port that answers the HTTP requests the SDK sends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fireworks
import httpx
import pytest
import tinker
from pydantic import SecretStr

from rllm.consumers.backends.fireworks.backend import FireworksBackend
from rllm.consumers.backends.tinker.backend import TinkerBackend, tinker_errors
from rllm.consumers.backends.tinker.datums import to_datums
from rllm.consumers.trainer.errors import FireworksError, TinkerError
from rllm.consumers.trainer.settings import BackendName, TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind
from rllm.errors import ConfigError
from tests.fakes_training.fireworks import FakeFireworks
from tests.fakes_training.tinker import LOSS_INPUTS, FakeTinker
from tests.unit.consumers.trainer.factory import batch


@pytest.fixture
def tinker_service() -> Iterator[tuple[FakeTinker, str]]:
    fake = FakeTinker()
    server = fake.serve()
    yield fake, server.url
    server.stop()


def _tinker_settings(url: str, **overrides: object) -> TrainerSettings:
    base: dict[str, object] = {
        "backend": BackendName.TINKER,
        "model": "Qwen/Qwen3-8B",
        "lora_rank": 16,
        "tinker_api_key": SecretStr("tml-test"),
        "tinker_url": url,
        "run_id": "r1",
    }
    return TrainerSettings(**(base | overrides))


def test_tinker_backend_trains_saves_and_resumes_through_the_sdk(
    tinker_service: tuple[FakeTinker, str], tmp_path: Path
) -> None:
    fake, url = tinker_service
    backend = TinkerBackend(_tinker_settings(url))
    res = backend.update(batch())
    assert res.version == 1 and res.metrics == {"loss:sum": 0.5} and fake.steps == 1
    assert fake.ops() == ["create_model", "get_info", "forward_backward", "optim_step"]
    (create,) = fake.bodies("create_model")
    assert create["base_model"] == "Qwen/Qwen3-8B" and create["lora_config"]["rank"] == 16
    (fb,) = fake.bodies("forward_backward")
    assert fb["loss_fn"] == "ppo" and fb["model_id"] == "session-1:train:0"
    assert fb["seq_id"] == 1 and fb["forward_only"] is False
    datum = fb["data"][0]
    assert datum["tokens"] == [3, 4, 5, 6, 7, 8]
    assert datum["loss_fn_inputs"]["target_tokens"]["data"] == [4, 5, 6, 7, 8, 9]
    # token-mean over 12 loss tokens: advantage 0.5 / 12 on the 3 sampled targets
    assert datum["loss_fn_inputs"]["advantages"]["data"] == pytest.approx(
        [0, 0, 0, 0.5 / 12, 0.5 / 12, 0.5 / 12]
    )
    (step,) = fake.bodies("optim_step")
    assert step["adam_params"]["learning_rate"] == backend.settings.lr and step["seq_id"] == 2
    uri = backend.save(tmp_path / "v1")
    assert uri == "tinker://session-1:train:0/sampler_weights/r1-v000001"
    assert sorted(fake.saved) == [
        "tinker://session-1:train:0/sampler_weights/r1-v000001",
        "tinker://session-1:train:0/weights/r1-v000001",
    ]
    backend.load(tmp_path / "v1", 1)
    (load,) = fake.bodies("load_weights")
    assert load["path"] == "tinker://session-1:train:0/weights/r1-v000001"
    assert load["optimizer"] is True and load["model_seq_id"] == 1
    assert backend.version == 1 and backend.sampler_path == uri
    assert backend.update(batch()).version == 2  # the resumed model trains on
    assert fake.bodies("forward_backward")[-1]["model_id"] == "session-1:train:1"
    backend.close()
    assert fake.finished == ["success"] and fake.unknown == []


def test_tinker_refusals_surface_as_tinker_errors(
    tinker_service: tuple[FakeTinker, str], tmp_path: Path
) -> None:
    fake, url = tinker_service
    with pytest.raises(TinkerError, match="401"):
        TinkerBackend(_tinker_settings(url, tinker_api_key=SecretStr("tml-wrong")))
    assert fake.calls == [("client/config", {"refused": 401})]  # refused at the first call
    backend = TinkerBackend(_tinker_settings(url))
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "tinker.json").write_text(
        '{"state_path": "tinker://x/weights/never-saved", "sampler_path": ""}'
    )
    with pytest.raises(TinkerError, match="no training state at tinker://x/weights/never-saved"):
        backend.load(tmp_path / "gone", 3)
    backend.close()


@pytest.mark.parametrize(
    ("loss", "loss_fn"),
    [
        (LossKind.GRPO, "ppo"),
        (LossKind.REINFORCE, "importance_sampling"),
        (LossKind.RLOO, "importance_sampling"),
        (LossKind.SFT, "cross_entropy"),
    ],
)
def test_every_tinker_loss_sends_the_inputs_the_service_takes(
    tinker_service: tuple[FakeTinker, str], loss: LossKind, loss_fn: str
) -> None:
    fake, url = tinker_service
    backend = TinkerBackend(_tinker_settings(url, loss=loss))
    assert backend.update(batch(1)).version == 1
    (fb,) = fake.bodies("forward_backward")
    assert fb["loss_fn"] == loss_fn
    assert {name: t["dtype"] for name, t in fb["data"][0]["loss_fn_inputs"].items()} == (
        LOSS_INPUTS[loss_fn]
    )
    backend.close()


def test_the_fake_refuses_a_datum_the_service_would_refuse(
    tinker_service: tuple[FakeTinker, str],
) -> None:
    """So the tests above can fail: loss inputs that do not fit the tokens, or that the
    loss does not take, come back as a failed request, as from the service."""
    fake, url = tinker_service
    poisoned = TinkerBackend(_tinker_settings(url))
    (good,) = to_datums(batch(1).sequences[:1], "ppo", LossAgg.TOKEN_MEAN)
    short = dict(good.loss_fn_inputs)
    short["logprobs"] = tinker.TensorData(data=[0.0] * 5, dtype="float32", shape=[5])
    refused = r"datum 0: logprobs has shape \[5\], model_input has 6"
    with pytest.raises(TinkerError, match=refused), tinker_errors("forward_backward"):
        poisoned.training.forward_backward(
            [tinker.Datum(model_input=good.model_input, loss_fn_inputs=short)], "ppo"
        ).result()
    poisoned.close("errored")
    backend = TinkerBackend(_tinker_settings(url))  # a failed request poisons its client
    refused = r"loss 'cross_entropy' takes inputs \['target_tokens', 'weights'\]"
    with pytest.raises(TinkerError, match=refused), tinker_errors("forward_backward"):
        backend.training.forward_backward([good], "cross_entropy").result()
    assert fake.steps == 0
    backend.close()
    assert fake.finished == ["errored", "success"]
    answer = httpx.post(f"{url}/api/v1/forward", headers={"X-API-Key": "tml-test"})
    assert (answer.status_code, answer.json()) == (404, {"detail": "Not Found"})
    assert fake.unknown == ["forward"]  # a route it does not serve


@pytest.fixture
def fireworks_service() -> Iterator[tuple[FakeFireworks, str]]:
    fake = FakeFireworks()
    server = fake.serve()
    yield fake, server.url
    server.stop()


def _fireworks(url: str, deployment: str = "accounts/acct/deployments/d1") -> FireworksBackend:
    settings = TrainerSettings(
        backend=BackendName.FIREWORKS,
        model="accounts/fireworks/models/x",
        loss=LossKind.SFT,
        lora_rank=8,
        fireworks_account="acct",
        fireworks_api_key=SecretStr("fw-test"),
        fireworks_url=url,
        run_id="run_a",
    )
    return FireworksBackend(
        settings,
        detokenize=lambda ids: ",".join(map(str, ids)),
        deployment=deployment,
        poll_s=0.01,
    )


def test_fireworks_backend_tunes_warm_starts_and_loads_through_the_sdk(
    fireworks_service: tuple[FakeFireworks, str], tmp_path: Path
) -> None:
    fake, url = fireworks_service
    backend = _fireworks(url)
    res = backend.update(batch())
    assert res.version == 1 and res.metrics == {"rows": 4.0}
    assert fake.datasets["run-a-v1"][0]["messages"] == [
        {"role": "user", "content": "3,4,5,6"},
        {"role": "assistant", "content": "7,8,9"},
    ]
    assert len(fake.datasets["run-a-v1"]) == 4
    job = fake.jobs["run-a-v1"]
    assert job["baseModel"] == "accounts/fireworks/models/x" and job["loraRank"] == 8
    assert job["dataset"] == "accounts/acct/datasets/run-a-v1" and "warmStartFrom" not in job
    assert job["outputModel"] == "accounts/acct/models/run-a-v1" and job["epochs"] == 1
    assert job["learningRate"] == backend.settings.lr and job["state"] == "JOB_STATE_COMPLETED"
    assert fake.deployed == [
        {
            "model": "accounts/acct/models/run-a-v1",
            "deployment": "accounts/acct/deployments/d1",
            "default": True,
            "serverless": False,
        }
    ]
    assert fake.calls == [
        ("POST", "datasets"),
        ("POST", "datasets/run-a-v1:upload"),
        ("POST", "supervisedFineTuningJobs"),
        ("GET", "supervisedFineTuningJobs/run-a-v1"),
        ("GET", "supervisedFineTuningJobs/run-a-v1"),
        ("POST", "deployedModels"),
        ("GET", "deployedModels/dm-1"),  # waited for DEPLOYING -> DEPLOYED
    ]
    backend.update(batch())
    second = fake.jobs["run-a-v2"]
    assert second["warmStartFrom"] == "accounts/acct/models/run-a-v1" and "baseModel" not in second
    assert backend.save(tmp_path / "c") == "fireworks://accounts/acct/models/run-a-v2"
    resumed = _fireworks(url)
    resumed.load(tmp_path / "c", 2)
    assert resumed.update(batch()).version == 3
    assert fake.jobs["run-a-v3"]["warmStartFrom"] == "accounts/acct/models/run-a-v2"
    backend.close()
    resumed.close()


def test_fireworks_refusals_surface_as_fireworks_errors(
    fireworks_service: tuple[FakeFireworks, str],
) -> None:
    fake, url = fireworks_service
    backend = _fireworks(url)
    with pytest.raises(FireworksError, match=r"at least 3 examples; the batch has 2"):
        backend.update(batch(1))
    fake.fail["run-a-v1"] = "out of memory"
    with pytest.raises(
        FireworksError, match="fine-tuning job run-a-v1 ended JOB_STATE_FAILED: out of memory"
    ):
        backend.update(batch())
    assert backend.version == 0 and fake.deployed == []
    with pytest.raises(FireworksError, match=r"dataset run-a-v1 answered 400: .*already exists"):
        backend.update(batch())  # the version's dataset id is taken: the API refuses a retry
    wrong = _fireworks(url)
    wrong.client.api_key = "fw-wrong"
    with pytest.raises(FireworksError, match="401"):
        wrong.update(batch())
    backend.close()
    wrong.close()


def test_the_fireworks_fake_refuses_what_the_api_refuses(
    fireworks_service: tuple[FakeFireworks, str],
) -> None:
    """So the tests above can fail: a field the route does not have, a job with both a
    base model and a warm start, a route the API does not serve."""
    _fake, url = fireworks_service
    client = _fireworks(url).client
    with pytest.raises(fireworks.BadRequestError, match='unknown field "exampleCnt"'):
        client.datasets.create(dataset_id="d", dataset={}, extra_body={"exampleCnt": "3"})
    client.datasets.create(dataset_id="d", dataset={"user_uploaded": {}})
    client.datasets.upload("d", file=("d.jsonl", b'{"messages": []}\n' * 3, "application/jsonl"))
    with pytest.raises(fireworks.BadRequestError, match="exactly one of baseModel"):
        client.supervised_fine_tuning_jobs.create(
            dataset="accounts/acct/datasets/d", base_model="m", warm_start_from="m2"
        )
    with pytest.raises(fireworks.NotFoundError, match="Not Found"):
        client.get("/v1/accounts/acct/fineTuningJobs", cast_to=object)
    client.close()


@pytest.mark.parametrize(("name", "module"), [("tinker", "tinker"), ("fireworks", "fireworks")])
def test_a_hosted_backend_without_its_sdk_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str
) -> None:
    import sys

    from rllm.consumers.backends import backend_capabilities

    monkeypatch.setitem(sys.modules, module, None)  # import of it fails as when absent
    for loaded in [m for m in sys.modules if m.startswith(f"rllm.consumers.backends.{name}")]:
        monkeypatch.delitem(sys.modules, loaded)
    with pytest.raises(ConfigError, match=rf"pip install 'rllm-stream\[{name}\]'"):
        backend_capabilities(BackendName(name))


def test_sft_on_tinker_checkpoints_resumes_and_ends_its_session(
    tinker_service: tuple[FakeTinker, str], tmp_path: Path
) -> None:
    """The trainer's own loop on the tinker backend it builds: each update is
    forward_backward + optim_step, each checkpoint two saves, a rerun resumes from the
    recorded state, and each run ends its service session."""
    from rllm.consumers.trainer.sft_loop import train_sft
    from tests.unit.consumers.trainer.test_sft_data import _write

    fake, url = tinker_service
    path = _write(tmp_path, ".jsonl")
    settings = _tinker_settings(
        url, loss=LossKind.SFT, checkpoint_dir=tmp_path / "ckpt", run_id="sft", lora_rank=8
    )
    report = train_sft(settings, path, epochs=2, batch_size=2)
    assert (report.updates, report.version) == (2, 2) and fake.steps == 2
    assert [b["loss_fn"] for b in fake.bodies("forward_backward")] == ["cross_entropy"] * 2
    assert fake.finished == ["success"]
    assert "tinker://session-1:train:0/weights/sft-v000002" in fake.saved
    more = train_sft(settings, path, epochs=3, batch_size=2)
    assert (more.resumed_version, more.updates, more.version) == (2, 1, 3)
    (load,) = fake.bodies("load_weights")
    assert load["path"] == "tinker://session-1:train:0/weights/sft-v000002"
    assert fake.bodies("forward_backward")[-1]["model_id"] == "session-2:train:1"
    assert fake.finished == ["success", "success"]
