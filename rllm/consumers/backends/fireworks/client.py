"""A small client for the Fireworks REST API (``/v1/accounts/{account}/...``): datasets,
supervised fine-tuning jobs, and loading a LoRA model onto a deployment (hot-load)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from rllm.consumers.backends.remote import call_service, service_client
from rllm.consumers.trainer.errors import FireworksError

__all__ = ["FireworksClient", "FireworksError"]


class FireworksClient:
    """Synchronous calls for one account."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        account: str,
        transport: httpx.BaseTransport | None = None,
        poll_s: float = 5.0,
        timeout_s: float = 3600.0,
    ) -> None:
        self.http = service_client(base_url, {"Authorization": f"Bearer {api_key}"}, transport)
        self.account, self.poll_s, self.timeout_s = account, poll_s, timeout_s

    def _req(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        url = f"/v1/accounts/{self.account}/{path}"
        return call_service(
            self.http, FireworksError, f"Fireworks {method} {url}", method, url, **kwargs
        )

    def upload_dataset(self, dataset_id: str, rows: list[dict[str, Any]]) -> str:
        """Create a dataset and upload JSONL rows; returns its resource name."""
        self._req(
            "POST",
            "datasets",
            json={
                "datasetId": dataset_id,
                "dataset": {"userUploaded": {}, "exampleCount": str(len(rows))},
            },
        )
        body = "\n".join(json.dumps(r) for r in rows).encode()
        self._req(
            "POST",
            f"datasets/{dataset_id}:upload",
            files={"file": (f"{dataset_id}.jsonl", body, "application/jsonl")},
        )
        return f"accounts/{self.account}/datasets/{dataset_id}"

    def fine_tune(
        self,
        job_id: str,
        dataset: str,
        base_model: str,
        output_model: str,
        lora_rank: int,
        lr: float,
        warm_start: str | None = None,
    ) -> dict[str, Any]:
        """Run a supervised fine-tuning job to completion; returns the finished job."""
        spec: dict[str, Any] = {
            "dataset": dataset,
            "outputModel": output_model,
            "loraRank": lora_rank,
            "learningRate": lr,
            "epochs": 1,
        }
        spec["warmStartFrom" if warm_start else "baseModel"] = warm_start or base_model
        self._req(
            "POST",
            "supervisedFineTuningJobs",
            params={"supervisedFineTuningJobId": job_id},
            json=spec,
        )
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            job = self._req("GET", f"supervisedFineTuningJobs/{job_id}")
            state = job.get("state", "")
            if state == "JOB_STATE_COMPLETED":
                return job
            if state in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"):
                raise FireworksError(
                    f"fine-tuning job {job_id} ended {state}: "
                    f"{job.get('status', {}).get('message', '')}"
                )
            time.sleep(self.poll_s)
        raise FireworksError(f"fine-tuning job {job_id} did not finish in {self.timeout_s}s")

    def hot_load(self, model: str, deployment: str) -> dict[str, Any]:
        """Load a LoRA model onto a running deployment and make it the default."""
        return self._req(
            "POST",
            "deployedModels",
            json={"model": model, "deployment": deployment, "default": True, "serverless": False},
        )
