"""An in-process HTTP fake of Daytona's REST API and toolbox, for the real ``daytona`` SDK.

Served by uvicorn on a loopback port: ``{url}/api`` is the API the SDK's ``api_url``
points at, ``{url}/toolbox`` the toolbox proxy every sandbox names in ``toolboxProxyUrl``.
Paths, JSON shapes (camelCase, as the generated client reads them), status codes and the
error envelope ``{"message", "statusCode", "code", "source"}`` follow the SDK's client
(``daytona_api_client_async``, ``daytona_toolbox_api_client_async``). Sandboxes are
``started`` at once; each is a real engine sandbox (``engine.py``), so commands run for
real. ``/process/execute`` runs the command with ``sh -c`` and answers the combined output;
without a ``timeout`` the deadline is Daytona's 10 s, and a command past it is killed and
answered 408 ``PROCESS_EXECUTION_TIMEOUT``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rllm.sandboxes.types import NetworkMode, SandboxBackend, SandboxSpec, labels_match
from tests.fakes_sandboxes.daytona_toolbox import (
    DEFAULT_EXEC_TIMEOUT_S,
    FakeSandbox,
    ToolboxRoutes,
    error,
)
from tests.fakes_sandboxes.engine import DEFAULT_IMAGE, DockerfileRefused, build_dockerfile

__all__ = [
    "DEFAULT_EXEC_TIMEOUT_S",
    "FAKE_API_KEY",
    "FakeDaytona",
]

FAKE_API_KEY = "fake-daytona-key"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class FakeSnapshot:
    """One snapshot: its DTO and the engine image sandboxes from it start from."""

    dto: dict[str, Any]
    image: str


@dataclass
class FakeDaytona(ToolboxRoutes):
    """The fake service's state, and its ASGI app (``app``)."""

    engine: SandboxBackend
    api_key: str = FAKE_API_KEY
    url: str = ""
    sandboxes: dict[str, FakeSandbox] = field(default_factory=dict)
    snapshots: dict[str, FakeSnapshot] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    """Every request as (method, path, JSON body or None), for tests to inspect."""

    # --- plumbing ---------------------------------------------------------------------
    @property
    def app(self) -> Starlette:
        """The ASGI app; its lifespan shutdown closes every engine sandbox left."""
        api, box = "/api", "/toolbox/{sid}"
        routes = [
            Route(f"{api}/sandbox", self._guard(self.create_sandbox), methods=["POST"]),
            Route(f"{api}/sandbox", self._guard(self.list_sandboxes), methods=["GET"]),
            Route(f"{api}/sandbox/{{sid}}", self._guard(self.get_sandbox), methods=["GET"]),
            Route(f"{api}/sandbox/{{sid}}", self._guard(self.delete_sandbox), methods=["DELETE"]),
            Route(f"{api}/sandbox/{{sid}}/start", self._guard(self.start), methods=["POST"]),
            Route(f"{api}/sandbox/{{sid}}/stop", self._guard(self.stop), methods=["POST"]),
            Route(f"{api}/sandbox/{{sid}}/snapshot", self._guard(self.snap), methods=["POST"]),
            Route(f"{api}/sandbox/{{sid}}/toolbox-proxy-url", self._guard(self.proxy_url)),
            Route(f"{api}/snapshots", self._guard(self.create_snapshot), methods=["POST"]),
            Route(f"{api}/snapshots", self._guard(self.list_snapshots), methods=["GET"]),
            Route(f"{api}/snapshots/{{sid}}", self._guard(self.get_snapshot), methods=["GET"]),
            Route(
                f"{api}/snapshots/{{sid}}", self._guard(self.remove_snapshot), methods=["DELETE"]
            ),
            Route(f"{api}/object-storage/push-access", self._guard(self.no_storage)),
            Route(f"{box}/process/execute", self._guard(self.execute), methods=["POST"]),
            Route(f"{box}/files/bulk-upload", self._guard(self.upload), methods=["POST"]),
            Route(f"{box}/files/bulk-download", self._guard(self.download), methods=["POST"]),
            Route(f"{box}/files/permissions", self._guard(self.permissions), methods=["POST"]),
        ]
        return Starlette(routes=routes, lifespan=self._lifespan)

    @asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        yield
        for sandbox in list(self.sandboxes.values()):
            if sandbox.engine is not None:
                await sandbox.engine.close()
        self.sandboxes.clear()
        await self.engine.aclose()

    def _guard(self, handler: Callable[[Request], Awaitable[Response]]) -> Any:
        async def endpoint(request: Request) -> Response:
            if request.headers.get("authorization") != f"Bearer {self.api_key}":
                return error(401, "Unauthorized: invalid API key")
            body = None
            if request.headers.get("content-type", "").startswith("application/json"):
                body = json.loads(await request.body() or b"null")
            self.requests.append((request.method, request.url.path, body))
            return await handler(request)

        return endpoint

    def _snapshot(self, key: str) -> FakeSnapshot | None:
        found = self.snapshots.get(key)
        return found or next((s for s in self.snapshots.values() if s.dto["name"] == key), None)

    # --- sandboxes --------------------------------------------------------------------
    async def create_sandbox(self, request: Request) -> Response:
        body = await request.json()
        snapshot_name = body.get("snapshot")
        if snapshot_name:
            snap = self._snapshot(snapshot_name)
            if snap is None:
                return error(404, f"Snapshot {snapshot_name} not found")
            image = snap.image
        elif body.get("buildInfo"):
            build = body["buildInfo"]
            lines = [ln for ln in build.get("dockerfileContent", "").splitlines() if ln.strip()]
            if len(lines) != 1 or not lines[0].upper().startswith("FROM "):
                return error(400, "the fake builds sandbox images from a lone FROM line only")
            image = lines[0].split(None, 1)[1].strip()
        else:
            image = DEFAULT_IMAGE
        sid = str(uuid.uuid4())
        ttl = body.get("ttlMinutes")
        spec = SandboxSpec(
            image=image,
            workdir="/root",
            env=body.get("env") or {},
            network=NetworkMode.NONE if body.get("networkBlockAll") else NetworkMode.HOST,
            lifetime_s=ttl * 60.0 if ttl else None,
        )
        dto = {
            "id": sid,
            "organizationId": "fake-org",
            "name": body.get("name") or sid,
            "snapshot": snapshot_name,
            "user": body.get("user") or "daytona",
            "env": body.get("env") or {},
            "labels": body.get("labels") or {},
            "public": bool(body.get("public")),
            "networkBlockAll": bool(body.get("networkBlockAll")),
            "kvm": False,
            "target": body.get("target") or "us",
            "cpu": body.get("cpu") or 1,
            "gpu": 0,
            "memory": body.get("memory") or 1,
            "disk": body.get("disk") or 3,
            "state": "started",
            "desiredState": "started",
            "autoStopInterval": body.get("autoStopInterval", 15),
            "autoDeleteInterval": body.get("autoDeleteInterval", -1),
            "createdAt": _now(),
            "updatedAt": _now(),
            "toolboxProxyUrl": f"{self.url}/toolbox",
        }
        try:
            engine = await self.engine.create(spec)
        except LookupError as exc:  # ImageError: the build of that image failed
            dto.update(state="build_failed", errorReason=str(exc))
            self.sandboxes[sid] = FakeSandbox(dto=dto, engine=None)
            return JSONResponse(dto)
        self.sandboxes[sid] = FakeSandbox(dto=dto, engine=engine)
        return JSONResponse(dto)

    async def list_sandboxes(self, request: Request) -> Response:
        wanted = json.loads(request.query_params.get("labels") or "{}")
        items = [s.dto for s in self.sandboxes.values() if labels_match(s.dto["labels"], wanted)]
        return JSONResponse({"items": items, "nextCursor": None})

    async def get_sandbox(self, request: Request) -> Response:
        found = self._sandbox(request)
        if found is None:
            return error(404, f"Sandbox with ID or name {request.path_params['sid']} not found")
        return JSONResponse(found.dto)

    async def delete_sandbox(self, request: Request) -> Response:
        found = self._sandbox(request)
        if found is None:
            return error(404, f"Sandbox with ID or name {request.path_params['sid']} not found")
        del self.sandboxes[found.dto["id"]]
        if found.engine is not None:
            await found.engine.close()
        found.dto.update(state="destroyed", desiredState="destroyed", updatedAt=_now())
        return JSONResponse(found.dto)

    async def start(self, request: Request) -> Response:
        return self._put_in_state(request, "started")

    async def stop(self, request: Request) -> Response:
        return self._put_in_state(request, "stopped")

    def _put_in_state(self, request: Request, state: str) -> Response:
        """The sandbox the request names, now in ``state``; a 404 where there is none."""
        found = self._sandbox(request)
        if found is None:
            return error(404, "Sandbox not found")
        found.dto["state"] = state
        return JSONResponse(found.dto)

    async def proxy_url(self, request: Request) -> Response:
        return JSONResponse({"url": f"{self.url}/toolbox"})

    async def snap(self, request: Request) -> Response:
        found = self._sandbox(request)
        if found is None:
            return error(404, "Sandbox not found")
        engine = found.engine
        if engine is None or found.dto["state"] != "started":
            return error(400, f"Sandbox {found.dto['id']} is not started")
        name = (await request.json())["name"]
        if self._snapshot(name) is not None:
            return error(409, f"Snapshot with name {name} already exists")
        info = await engine.snapshot(f"fake-daytona-{uuid.uuid4().hex[:12]}")
        self._add_snapshot(name, info.image, source=found.dto["id"])
        return JSONResponse(found.dto)

    # --- snapshots --------------------------------------------------------------------
    def _add_snapshot(self, name: str, image: str, source: str | None = None) -> FakeSnapshot:
        sid = str(uuid.uuid4())
        dto = {
            "id": sid,
            "organizationId": "fake-org",
            "general": False,
            "name": name,
            "imageName": image,
            "state": "active",
            "size": 0.25,
            "entrypoint": None,
            "cpu": 1,
            "gpu": 0,
            "mem": 1,
            "disk": 3,
            "errorReason": None,
            "createdAt": _now(),
            "updatedAt": _now(),
            "lastUsedAt": None,
            "sourceSandboxId": source,
        }
        self.snapshots[sid] = snap = FakeSnapshot(dto=dto, image=image)
        return snap

    async def create_snapshot(self, request: Request) -> Response:
        body = await request.json()
        name = body["name"]
        if self._snapshot(name) is not None:
            return error(409, f"Snapshot with name {name} already exists")
        build = body.get("buildInfo")
        if build and build.get("contextHashes"):
            return error(400, "the fake has no object storage: COPY/ADD contexts are not built")
        if build:
            try:
                image = await build_dockerfile(
                    self.engine, build["dockerfileContent"], f"fake-daytona-{uuid.uuid4().hex[:12]}"
                )
            except (DockerfileRefused, LookupError) as exc:
                return error(400, f"snapshot {name} cannot be built: {exc}")
        else:
            image = body.get("imageName") or DEFAULT_IMAGE
        return JSONResponse(self._add_snapshot(name, image).dto)

    async def list_snapshots(self, request: Request) -> Response:
        items = [s.dto for s in self.snapshots.values()]
        return JSONResponse({"items": items, "total": len(items), "page": 1, "totalPages": 1})

    async def get_snapshot(self, request: Request) -> Response:
        found = self._snapshot(request.path_params["sid"])
        if found is None:
            return error(404, f"Snapshot {request.path_params['sid']} not found")
        return JSONResponse(found.dto)

    async def remove_snapshot(self, request: Request) -> Response:
        found = self._snapshot(request.path_params["sid"])
        if found is None:
            return error(404, f"Snapshot {request.path_params['sid']} not found")
        del self.snapshots[found.dto["id"]]
        return Response(status_code=200)

    async def no_storage(self, request: Request) -> Response:
        return error(501, "the fake Daytona has no object storage for build contexts")
