"""The history service: owns the chDB directory, runs the sink, and answers queries for the
CLI over a small HTTP API on a unix socket (chDB allows one process per directory).

``open_store`` is how every reader gets a store: the ClickHouse server when a URL is set,
else the running service's socket, else the chDB directory itself.
"""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.engine_server import ServerStore
from rllm.consumers.history.render import jsonable
from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.types import HistoryError, HistoryStore, QueryError, QueryResult

__all__ = ["QueryServer", "ServiceClient", "open_store", "run_service", "serve_queries"]


class _Handler(BaseHTTPRequestHandler):
    """``POST /query`` with ``{"sql", "params", "user"}``; answers ``{"columns", "rows"}``.

    Every request is a read under ``readonly=1``; ``"user": true`` (a statement a user
    wrote) adds the store's read limits.
    """

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        payload: dict[str, Any]
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            store: HistoryStore = self.server.store  # type: ignore[attr-defined]  # self.server is typed as the base server class
            run = store.query_user if body.get("user") else store.query
            result = run(body["sql"], body.get("params"))
            payload, status = (
                {
                    "columns": list(result.columns),
                    "rows": [[jsonable(v) for v in r] for r in result.rows],
                },
                200,
            )
        except QueryError as exc:
            payload, status = {"error": str(exc), "kind": "query"}, 400
        except (HistoryError, KeyError, ValueError) as exc:
            payload, status = {"error": str(exc), "kind": "history"}, 500
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


class QueryServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """HTTP on a unix socket, answering ``POST /query {"sql", "params"}`` from a store."""

    daemon_threads = True

    def __init__(self, path: Path, store: HistoryStore) -> None:
        path.unlink(missing_ok=True)
        super().__init__(str(path), _Handler)
        self.store = store
        self.path = path

    def get_request(self) -> tuple[Any, Any]:
        request, _ = super().get_request()
        return request, ("local", 0)  # http.server wants a (host, port) client address

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        self.shutdown()
        self.server_close()
        self.path.unlink(missing_ok=True)


def serve_queries(path: Path, store: HistoryStore) -> QueryServer:
    """Start answering queries on ``path`` in a background thread."""
    server = QueryServer(path, store)
    # poll 10 times a second, so that stop() (rllm-cli down, each test's teardown) returns in
    # 0.1 s rather than serve_forever's default 0.5 s
    threading.Thread(
        target=server.serve_forever, args=(0.1,), name="rllm-history-api", daemon=True
    ).start()
    return server


class ServiceClient:
    """A ``HistoryStore`` for reading through a running history service."""

    def __init__(self, path: Path, database: str, timeout_s: float = 120.0) -> None:
        self.database = database
        self.path = path
        self._client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(path)),
            base_url="http://history",
            timeout=timeout_s,
        )

    def ping(self) -> bool:
        """Whether the service answers."""
        try:
            self.query("SELECT 1")
        except (httpx.HTTPError, HistoryError):
            return False
        return True

    def create_schema(self) -> None:
        """The service created it."""

    def insert(self, table: str, batch: pa.Table) -> int:
        """Writes go through Kafka, never through the query API."""
        raise HistoryError("the history service's API is read-only; publish events to Kafka")

    def command(self, sql: str) -> None:
        """Statements are not accepted by the query API."""
        raise HistoryError("the history service's API is read-only")

    def query(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a read query of ours in the service (``readonly=1`` there)."""
        return self._post({"sql": sql, "params": params or {}})

    def query_user(self, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run a user's statement in the service, under its read-only session and limits."""
        return self._post({"sql": sql, "params": params or {}, "user": True})

    def _post(self, request: dict[str, Any]) -> QueryResult:
        resp = self._client.post("/query", json=request)
        body = resp.json()
        if resp.status_code == 400:
            raise QueryError(body["error"])
        if resp.status_code != 200:
            raise HistoryError(body.get("error", resp.text))
        return QueryResult(tuple(body["columns"]), [tuple(r) for r in body["rows"]])

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def open_store(settings: HistorySettings) -> HistoryStore:
    """The store a reader should use: server URL, else the service, else chDB directly."""
    if settings.clickhouse_url:
        pw = settings.clickhouse_password.get_secret_value() if settings.clickhouse_password else ""
        return ServerStore(
            settings.clickhouse_url,
            settings.history_database,
            settings.clickhouse_user,
            pw,
            limits=settings.read_limits,
        )
    sock = settings.socket_path
    if sock.exists():
        client = ServiceClient(sock, settings.history_database)
        if client.ping():
            return client
        client.close()
    store = ChdbStore(settings.history_dir, settings.history_database, settings.read_limits)
    store.create_schema()
    return store


def run_service(
    kafka: Any,
    settings: HistorySettings,
    stop: threading.Event | None = None,
    idle_exit_s: float | None = None,
) -> Any:
    """Own the store, answer queries on the socket (chDB), and sink Kafka into it.

    Returns:
        The sink's ``SinkStats`` when it stops.
    """
    from rllm.consumers.history.sink import HistorySink

    if settings.clickhouse_url:
        store: HistoryStore = open_store(settings)
        server = None
    else:
        store = ChdbStore(settings.history_dir, settings.history_database, settings.read_limits)
        store.create_schema()
        server = serve_queries(settings.socket_path, store)
    try:
        return HistorySink(kafka, settings, store).run(stop=stop, idle_exit_s=idle_exit_s)
    finally:
        if server is not None:
            server.stop()
        store.close()
