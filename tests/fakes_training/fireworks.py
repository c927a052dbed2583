"""A fake Fireworks account: datasets, supervised fine-tuning jobs, deployed models."""

from __future__ import annotations

import json
from typing import Any

import httpx


class FakeFireworks:
    """Records requests; a job is RUNNING on its first GET and COMPLETED after."""

    def __init__(self, account: str = "acct", api_key: str = "fw-test") -> None:
        self.account, self.api_key = account, api_key
        self.calls: list[tuple[str, str]] = []
        self.datasets: dict[str, list[dict[str, Any]]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.deployed: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return httpx.Response(401, json={"error": "unauthenticated"})
        prefix = f"/v1/accounts/{self.account}/"
        path = request.url.path
        if not path.startswith(prefix):
            return httpx.Response(404, json={"error": f"no such account path {path}"})
        rest = path.removeprefix(prefix)
        self.calls.append((request.method, rest))
        if request.method == "POST" and rest == "datasets":
            body = json.loads(request.content)
            self.datasets[body["datasetId"]] = []
            return httpx.Response(200, json={"name": f"{prefix[1:]}datasets/{body['datasetId']}"})
        if request.method == "POST" and rest.endswith(":upload"):
            ds = rest.removeprefix("datasets/").removesuffix(":upload")
            content = request.content.decode(errors="replace")
            start = content.index("{")
            end = content.rindex("}") + 1
            self.datasets[ds] = [json.loads(line) for line in content[start:end].splitlines()]
            return httpx.Response(200, json={})
        if request.method == "POST" and rest == "supervisedFineTuningJobs":
            job_id = request.url.params["supervisedFineTuningJobId"]
            spec = json.loads(request.content)
            ds = spec["dataset"].rsplit("/", 1)[-1]
            if ds not in self.datasets or not self.datasets[ds]:
                return httpx.Response(400, json={"error": f"dataset {ds} is empty"})
            self.jobs[job_id] = {**spec, "state": "JOB_STATE_CREATING", "polls": 0}
            return httpx.Response(200, json={"name": job_id, "state": "JOB_STATE_CREATING"})
        if request.method == "GET" and rest.startswith("supervisedFineTuningJobs/"):
            job = self.jobs[rest.split("/", 1)[1]]
            job["polls"] += 1
            job["state"] = "JOB_STATE_RUNNING" if job["polls"] == 1 else "JOB_STATE_COMPLETED"
            return httpx.Response(200, json={"state": job["state"]})
        if request.method == "POST" and rest == "deployedModels":
            self.deployed.append(json.loads(request.content))
            return httpx.Response(200, json={"state": "DEPLOYED"})
        return httpx.Response(404, json={"error": f"unknown {request.method} {rest}"})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)
