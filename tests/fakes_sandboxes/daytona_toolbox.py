"""The toolbox half of the Daytona fake: ``/process/execute`` and the file API, which
the SDK reaches at each sandbox's ``toolboxProxyUrl`` + ``/{sandboxId}``."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rllm.sandboxes.types import Sandbox

__all__ = ["DAEMON", "DEFAULT_EXEC_TIMEOUT_S", "FakeSandbox", "ToolboxRoutes", "error"]

DAEMON = "DAYTONA_DAEMON"
"""The ``source`` of the toolbox daemon's errors (the SDK maps (source, code) to classes)."""
DEFAULT_EXEC_TIMEOUT_S = 10
"""Daytona's ``/process/execute`` deadline when the request sends no timeout."""


def error(
    status: int, message: str, code: str | None = None, source: str = "DAYTONA_API"
) -> Response:
    body: dict[str, Any] = {"statusCode": status, "message": message, "source": source}
    if code:
        body["code"] = code
    return JSONResponse(body, status_code=status)


@dataclass
class FakeSandbox:
    """One sandbox of the fake service: its DTO and the engine sandbox doing the work."""

    dto: dict[str, Any]
    engine: Sandbox | None
    """None when its image failed to build (state ``build_failed``)."""


class ToolboxRoutes:
    """Handlers of the toolbox paths, over ``self.sandboxes``."""

    sandboxes: dict[str, FakeSandbox]

    def _sandbox(self, request: Request) -> FakeSandbox | None:
        sid = request.path_params["sid"]
        found = self.sandboxes.get(sid)
        return found or next((s for s in self.sandboxes.values() if s.dto["name"] == sid), None)

    def _started(self, request: Request) -> Sandbox | Response:
        """The engine sandbox of a started sandbox, or the proxy's error response."""
        found = self._sandbox(request)
        if found is None:
            return error(404, "Sandbox not found", source="DAYTONA_PROXY")
        if found.engine is None or found.dto["state"] != "started":
            return error(400, f"Sandbox {found.dto['id']} is not started", source="DAYTONA_PROXY")
        return found.engine

    # --- toolbox ----------------------------------------------------------------------
    async def execute(self, request: Request) -> Response:
        engine = self._started(request)
        if isinstance(engine, Response):
            return engine
        body = await request.json()
        timeout = body.get("timeout") or DEFAULT_EXEC_TIMEOUT_S
        result = await engine.exec(
            ["/bin/sh", "-c", body["command"]],
            cwd=body.get("cwd") or "/root",
            env=body.get("envs") or {},
            timeout_s=float(timeout),
        )
        if result.timed_out:
            return error(408, "command execution timeout", "PROCESS_EXECUTION_TIMEOUT", DAEMON)
        return JSONResponse({"exitCode": result.exit_code, "result": result.stdout + result.stderr})

    async def upload(self, request: Request) -> Response:
        engine = self._started(request)
        if isinstance(engine, Response):
            return engine
        async with request.form() as form:
            paths: dict[str, str] = {}
            files: dict[str, UploadFile] = {}
            for key, value in form.multi_items():
                index, _, kind = key.partition(".")
                if kind == "path" and isinstance(value, str):
                    paths[index] = value
                elif kind == "file" and isinstance(value, UploadFile):
                    files[index] = value
            for index, upload in files.items():
                target = paths.get(index) or upload.filename or ""
                await engine.write_file(target, await upload.read())
        return Response(status_code=200)

    async def download(self, request: Request) -> Response:
        engine = self._started(request)
        if isinstance(engine, Response):
            return engine
        boundary = uuid.uuid4().hex
        parts: list[bytes] = []
        for path in (await request.json())["paths"]:
            try:
                data, name, ctype = (
                    await engine.read_file(path),
                    "file",
                    "application/octet-stream",
                )
            except FileNotFoundError:
                payload = {
                    "message": f"file not found: {path}",
                    "statusCode": 404,
                    "code": "FILE_NOT_FOUND",
                    "source": DAEMON,
                }
                data, name, ctype = json.dumps(payload).encode(), "error", "application/json"
            head = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                f'filename="{path}"\r\nContent-Type: {ctype}\r\n\r\n'
            )
            parts.append(head.encode() + data + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return Response(body, media_type=f"multipart/form-data; boundary={boundary}")

    async def permissions(self, request: Request) -> Response:
        engine = self._started(request)
        if isinstance(engine, Response):
            return engine
        q = request.query_params
        mode = q.get("mode")
        if mode:
            result = await engine.exec(["chmod", mode, q["path"]], cwd="/", timeout_s=30)
            if not result.ok:
                missing = "No such" in result.stderr
                return error(
                    404 if missing else 400,
                    result.stderr.strip(),
                    "FILE_NOT_FOUND" if missing else None,
                    DAEMON,
                )
        return Response(status_code=200)
