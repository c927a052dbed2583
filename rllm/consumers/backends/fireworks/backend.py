"""The ``fireworks`` backend, through the ``fireworks-ai`` SDK: each update is a LoRA
supervised fine-tuning job on the batch, warm-started from the previous version and loaded
onto a deployment."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import fireworks

from rllm.consumers.backends.remote import RemoteBackend, missing, remote_capabilities
from rllm.consumers.trainer.errors import FireworksError
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossAgg, LossKind, TrainBatch, UpdateResult
from rllm.errors import ConfigError

__all__ = ["FIREWORKS_CAPABILITIES", "MIN_EXAMPLES", "FireworksBackend", "fireworks_errors"]

FIREWORKS_CAPABILITIES = remote_capabilities(
    frozenset({LossKind.SFT}), frozenset({LossAgg.TOKEN_MEAN})
)
MIN_EXAMPLES = 3
"""The fewest examples a Fireworks fine-tuning dataset may hold (its documented minimum)."""
_ENDED = {"JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


@contextmanager
def fireworks_errors(what: str) -> Iterator[None]:
    """Re-raise the SDK's errors (a refused request, an unreachable API) as
    ``FireworksError`` naming ``what``."""
    try:
        yield
    except fireworks.APIStatusError as exc:
        raise FireworksError(f"Fireworks {what} answered {exc.status_code}: {exc.message}") from exc
    except fireworks.FireworksError as exc:
        raise FireworksError(f"Fireworks {what} failed: {exc}") from exc


class FireworksBackend(RemoteBackend):
    """SFT on Fireworks; ``detokenize`` turns token IDs back into message text.

    Args:
        settings: the trainer's settings (``model`` is the base model to tune).
        detokenize: token IDs to text, with the served model's tokenizer.
        deployment: where each new version is loaded (``accounts/A/deployments/D``);
            empty: the versions are trained and not loaded anywhere.
        poll_s: seconds between two reads of a running job or a loading model.
        timeout_s: the longest a job, or a load, may take.
    """

    name = "fireworks"
    capabilities = FIREWORKS_CAPABILITIES

    def __init__(
        self,
        settings: TrainerSettings,
        detokenize: Callable[[list[int]], str] | None = None,
        deployment: str = "",
        poll_s: float = 5.0,
        timeout_s: float = 3600.0,
    ) -> None:
        if settings.fireworks_api_key is None or not settings.fireworks_account:
            raise missing(self.name, "RLLM_FIREWORKS_API_KEY and RLLM_FIREWORKS_ACCOUNT")
        if detokenize is None:
            raise ConfigError("backend 'fireworks' trains on text: give it a detokenizer")
        super().__init__(settings)
        self.detokenize, self.deployment = detokenize, deployment
        self.poll_s, self.timeout_s = poll_s, timeout_s
        self.client = fireworks.Fireworks(
            api_key=settings.fireworks_api_key.get_secret_value(),
            account_id=settings.fireworks_account,
            base_url=settings.fireworks_url,
        )
        self.model_name = ""

    def update(self, batch: TrainBatch) -> UpdateResult:
        """Upload the batch as chat rows, fine-tune, load the new model."""
        rows = []
        for s in batch.sequences:
            first = s.loss_mask_T.index(1) if 1 in s.loss_mask_T else len(s.input_ids_T)
            rows.append(
                {
                    "messages": [
                        {"role": "user", "content": self.detokenize(s.input_ids_T[:first])},
                        {"role": "assistant", "content": self.detokenize(s.input_ids_T[first:])},
                    ]
                }
            )
        if len(rows) < MIN_EXAMPLES:
            raise FireworksError(
                f"Fireworks fine-tunes on at least {MIN_EXAMPLES} examples; the batch has "
                f"{len(rows)} sequences: raise --batch-size"
            )
        version = self._version + 1
        tag = f"{self.settings.run_id}-v{version}".lower().replace("_", "-")
        dataset = self._upload(tag, rows)
        output = f"accounts/{self.settings.fireworks_account}/models/{tag}"
        self._fine_tune(tag, dataset, output)
        if self.deployment:
            self._load(output)
        self.model_name, self._version = output, version
        return UpdateResult(version, {"rows": float(len(rows))})

    def _upload(self, dataset_id: str, rows: Sequence[Mapping[str, object]]) -> str:
        """Create a dataset and upload the rows as JSONL; return its resource name."""
        body = "\n".join(json.dumps(r) for r in rows).encode()
        with fireworks_errors(f"dataset {dataset_id}"):
            self.client.datasets.create(
                dataset_id=dataset_id,
                dataset={"user_uploaded": {}, "example_count": str(len(rows))},
            )
            self.client.datasets.upload(
                dataset_id, file=(f"{dataset_id}.jsonl", body, "application/jsonl")
            )
        return f"accounts/{self.settings.fireworks_account}/datasets/{dataset_id}"

    def _fine_tune(self, job_id: str, dataset: str, output: str) -> None:
        """Run one LoRA fine-tuning job to completion, from the previous version if any."""
        jobs = self.client.supervised_fine_tuning_jobs
        with fireworks_errors(f"fine-tuning job {job_id}"):
            job = jobs.create(
                supervised_fine_tuning_job_id=job_id,
                dataset=dataset,
                output_model=output,
                lora_rank=self.settings.lora_rank,
                learning_rate=self.settings.lr,
                epochs=1,
                base_model=fireworks.omit if self.model_name else self.settings.model,
                warm_start_from=self.model_name or fireworks.omit,
            )
            deadline = time.monotonic() + self.timeout_s
            while job.state != "JOB_STATE_COMPLETED":
                if job.state in _ENDED:
                    message = job.status.message if job.status else ""
                    raise FireworksError(f"fine-tuning job {job_id} ended {job.state}: {message}")
                if time.monotonic() > deadline:
                    raise FireworksError(
                        f"fine-tuning job {job_id} did not finish in {self.timeout_s}s "
                        f"(last state {job.state})"
                    )
                time.sleep(self.poll_s)
                job = jobs.get(job_id)

    def _load(self, model: str) -> None:
        """Load the LoRA model onto the deployment as its default, and wait until served."""
        with fireworks_errors(f"load {model} onto {self.deployment}"):
            deployed = self.client.lora.load(
                model=model, deployment=self.deployment, default=True, serverless=False
            )
            ident = (deployed.name or "").rsplit("/", 1)[-1]
            deadline = time.monotonic() + self.timeout_s
            while deployed.state != "DEPLOYED":
                if time.monotonic() > deadline:
                    raise FireworksError(
                        f"{model} was not deployed on {self.deployment} in {self.timeout_s}s "
                        f"(last state {deployed.state})"
                    )
                time.sleep(self.poll_s)
                deployed = self.client.lora.get(ident)

    def save(self, directory: Path) -> str:
        """The model lives on Fireworks; record its name locally."""
        self._write_record(directory, {"model": self.model_name})
        return f"fireworks://{self.model_name}"

    def load(self, directory: Path, version: int) -> None:
        """Resume from the recorded model name."""
        self.model_name = self._read_record(directory)["model"]
        self._version = version

    def close(self) -> None:
        """Close the SDK's HTTP connections."""
        self.client.close()
