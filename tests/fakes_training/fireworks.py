"""A fake Fireworks account: the REST routes the ``fireworks-ai`` SDK (1.2) sends for
datasets, supervised fine-tuning jobs and LoRA loads, served on a loopback port.

What the SDK sends, read from its source (``fireworks/resources``), all under
``/v1/accounts/{account_id}/`` with ``Authorization: Bearer <key>``:

- ``POST datasets`` ``{datasetId, dataset: {userUploaded, exampleCount}}``, then ``POST
  datasets/{id}:upload``, a multipart form whose ``file`` holds the JSONL rows;
- ``POST supervisedFineTuningJobs?supervisedFineTuningJobId=ID`` with the job's camelCase
  fields, and ``GET supervisedFineTuningJobs/{id}`` (``state``: CREATING, then RUNNING on
  the first poll and COMPLETED on the second, or FAILED for a job in ``fail``);
- ``POST deployedModels`` ``{model, deployment, default, serverless}`` (the Load LoRA
  call; answers DEPLOYING) and ``GET deployedModels/{id}`` (DEPLOYED from then on).

Refusals in the API's error shape (``{"code", "message", "details"}``): a wrong key 401,
another account 403, an unknown route 404, a field the route does not have 400 (``unknown
field``), a job on a missing or empty dataset, with both or neither of ``baseModel`` and
``warmStartFrom``, or warm-started from a model no job wrote, 400.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server import ThreadedServer

__all__ = ["FakeFireworks"]

_DATASET_FIELDS = {"datasetId", "dataset", "sourceDatasetId"}
_JOB_FIELDS = {
    "dataset",
    "awsS3Config",
    "azureBlobStorageConfig",
    "baseModel",
    "batchSize",
    "batchSizeSamples",
    "samplerCheckpointSaveIntervalSteps",
    "displayName",
    "earlyStop",
    "epochs",
    "evalAutoCarveout",
    "evaluationDataset",
    "gradientAccumulationSteps",
    "isTurbo",
    "jinjaTemplate",
    "learningRate",
    "learningRateWarmupSteps",
    "loraRank",
    "maxContextLength",
    "metricsFileSignedUrl",
    "mtpEnabled",
    "mtpFreezeBaseModel",
    "mtpNumDraftTokens",
    "nodes",
    "optimizerWeightDecay",
    "outputModel",
    "rendererHuggingFaceRepoId",
    "region",
    "usePurpose",
    "reservationTarget",
    "useReservation",
    "wandbConfig",
    "warmStartFrom",
}
_DEPLOYED_MODEL_FIELDS = {
    "model",
    "deployment",
    "default",
    "serverless",
    "public",
    "description",
    "displayName",
}
_CODES = {400: 3, 401: 16, 403: 7, 404: 5}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"code": _CODES[status], "message": message, "details": []}, status_code=status
    )


def _unknown(body: dict[str, Any], known: set[str]) -> JSONResponse | None:
    extra = sorted(set(body) - known)
    return _error(400, f'unknown field "{extra[0]}"') if extra else None


class FakeFireworks:
    """The account's state; ``calls`` holds ``(method, path under the account)`` in order."""

    def __init__(self, account: str = "acct", api_key: str = "fw-test") -> None:
        self.account, self.api_key = account, api_key
        self.calls: list[tuple[str, str]] = []
        self.datasets: dict[str, list[dict[str, Any]]] = {}
        """Dataset id -> its uploaded rows."""
        self.jobs: dict[str, dict[str, Any]] = {}
        """Job id -> the body it was created with, its ``state`` and ``polls``."""
        self.models: set[str] = set()
        """Model names written by completed jobs."""
        self.deployed: list[dict[str, Any]] = []
        """Load LoRA bodies, in order."""
        self.loads: list[dict[str, Any]] = []
        """Load LoRA query parameters, in order."""
        self.fail: dict[str, str] = {}
        """Job id -> the message it fails with."""
        self._deployed_ids = itertools.count(1)
        self._deployed_state: dict[str, str] = {}
        self.app = Starlette(
            routes=[Route("/{path:path}", self._route, methods=["GET", "POST", "PATCH", "DELETE"])]
        )

    def serve(self) -> ThreadedServer:
        """Serve on a free loopback port; the server's ``url`` is the SDK's ``base_url``."""
        return ThreadedServer(self.app)

    async def _route(self, request: Request) -> Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "unauthenticated: invalid API key")
        path = "/" + request.path_params["path"]
        prefix = f"/v1/accounts/{self.account}/"
        if not path.startswith(prefix):
            if path.startswith("/v1/accounts/"):
                return _error(403, f"permission denied on {path}")
            return _error(404, "Not Found")
        rest = path.removeprefix(prefix)
        self.calls.append((request.method, rest))
        method = request.method
        if method == "POST" and rest == "datasets":
            return self._create_dataset(json.loads(await request.body()))
        if method == "POST" and rest.startswith("datasets/") and rest.endswith(":upload"):
            dataset = rest.removeprefix("datasets/").removesuffix(":upload")
            return await self._upload(dataset, request)
        if method == "POST" and rest == "supervisedFineTuningJobs":
            job_id = request.query_params.get("supervisedFineTuningJobId", "")
            return self._create_job(job_id, json.loads(await request.body()))
        if method == "GET" and rest.startswith("supervisedFineTuningJobs/"):
            return self._get_job(rest.split("/", 1)[1])
        if method == "POST" and rest == "deployedModels":
            return self._load_lora(dict(request.query_params), json.loads(await request.body()))
        if method == "GET" and rest.startswith("deployedModels/"):
            return self._get_deployed(rest.split("/", 1)[1])
        return _error(404, "Not Found")

    def _name(self, kind: str, ident: str) -> str:
        return f"accounts/{self.account}/{kind}/{ident}"

    def _create_dataset(self, body: dict[str, Any]) -> Response:
        if (refused := _unknown(body, _DATASET_FIELDS)) is not None:
            return refused
        ds = body.get("datasetId", "")
        if not ds:
            return _error(400, "datasetId is required")
        if ds in self.datasets:
            return _error(400, f"dataset {self._name('datasets', ds)} already exists")
        self.datasets[ds] = []
        return JSONResponse({"name": self._name("datasets", ds), **body["dataset"]})

    async def _upload(self, ds: str, request: Request) -> Response:
        if ds not in self.datasets:
            return _error(404, f"dataset {self._name('datasets', ds)} not found")
        async with request.form() as form:
            file = form.get("file")
            if not isinstance(file, UploadFile):
                return _error(400, "the upload needs a multipart file field named 'file'")
            content = (await file.read()).decode()
        self.datasets[ds] = [json.loads(line) for line in content.splitlines() if line.strip()]
        return JSONResponse({"filename": file.filename, "bytes": len(content)})

    def _create_job(self, job_id: str, body: dict[str, Any]) -> Response:
        if (refused := _unknown(body, _JOB_FIELDS)) is not None:
            return refused
        ds = str(body.get("dataset", "")).removeprefix(self._name("datasets", ""))
        if not self.datasets.get(ds):
            return _error(400, f"dataset {body.get('dataset')!r} is missing or empty")
        if ("baseModel" in body) == ("warmStartFrom" in body):
            return _error(400, "exactly one of baseModel and warmStartFrom must be set")
        if "warmStartFrom" in body and body["warmStartFrom"] not in self.models:
            return _error(400, f"warmStartFrom {body['warmStartFrom']!r} is not a model")
        self.jobs[job_id] = {**body, "state": "JOB_STATE_CREATING", "polls": 0}
        return JSONResponse(self._job(job_id))

    def _job(self, job_id: str) -> dict[str, Any]:
        job = {k: v for k, v in self.jobs[job_id].items() if k != "polls"}
        return {**job, "name": self._name("supervisedFineTuningJobs", job_id)}

    def _get_job(self, job_id: str) -> Response:
        job = self.jobs.get(job_id)
        if job is None:
            return _error(404, f"job {self._name('supervisedFineTuningJobs', job_id)} not found")
        job["polls"] += 1
        if job["polls"] == 1:
            job["state"] = "JOB_STATE_RUNNING"
        elif job_id in self.fail:
            job["state"], job["status"] = "JOB_STATE_FAILED", {"message": self.fail[job_id]}
        else:
            job["state"] = "JOB_STATE_COMPLETED"
            self.models.add(job["outputModel"])
        return JSONResponse(self._job(job_id))

    def _load_lora(self, query: dict[str, str], body: dict[str, Any]) -> Response:
        if (refused := _unknown(body, _DEPLOYED_MODEL_FIELDS)) is not None:
            return refused
        if body.get("model") not in self.models:
            return _error(400, f"model {body.get('model')!r} not found")
        if body.get("serverless"):
            return _error(400, "a LoRA addon needs a dedicated deployment (serverless=false)")
        self.deployed.append(body)
        self.loads.append(query)
        ident = f"dm-{next(self._deployed_ids)}"
        self._deployed_state[ident] = "DEPLOYING"
        name = self._name("deployedModels", ident)
        return JSONResponse({**body, "name": name, "state": "DEPLOYING"})

    def _get_deployed(self, ident: str) -> Response:
        if ident not in self._deployed_state:
            return _error(404, f"deployed model {ident} not found")
        self._deployed_state[ident] = "DEPLOYED"
        return JSONResponse({"name": self._name("deployedModels", ident), "state": "DEPLOYED"})
