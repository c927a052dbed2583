"""The viewer's ASGI app: server-rendered pages (Jinja2) over the history, htmx for the
filters and a live run's refresh, uPlot for the charts; both served from the package.

Pages: ``/`` (runs), ``/runs/{run}``, ``/trajectories/{session}``, ``/compare``. A page that
cannot be shown says why with its status (404 for an unknown run or trajectory, 400 for a
bad parameter, 503 when the history cannot be read), never with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from rllm.consumers.history import HistoryError
from rllm.consumers.viewer import compare as comparing
from rllm.consumers.viewer import reads
from rllm.consumers.viewer.errors import BadRequestError, ViewerError
from rllm.consumers.viewer.settings import ViewerSettings, is_loopback
from rllm.consumers.viewer.source import StoreSource
from rllm.consumers.viewer.trajectory import trajectory_page

__all__ = ["VIEWER_HEADER", "create_app"]

log = logging.getLogger("rllm.viewer")
_HERE = Path(__file__).parent
VIEWER_HEADER = "x-rllm-viewer"
"""Set on ``/healthz``: how ``rllm-cli view`` tells a viewer already serving from another
program holding the port."""
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _fmt(value: Any, digits: int = 4) -> str:
    """A cell: '' for none, numbers rounded, times to the second in UTC."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "" if value != value else f"{round(value, digits):g}"
    if isinstance(value, list):
        return " / ".join(_fmt(v, digits) for v in value)
    return str(value)


def _lp_class(logprob: float | None) -> str:
    """The colour class of a token: lp0 (p < 0.1) … lp9 (p ≥ 0.9); none without one."""
    import math

    if logprob is None:
        return "lpn"
    return f"lp{min(9, int(math.exp(logprob) * 10))}"


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    env = templates.env
    env.autoescape = True
    env.filters["fmt"] = _fmt
    env.filters["lp_class"] = _lp_class
    env.filters["q"] = lambda s: quote(str(s), safe="")
    env.filters["qpath"] = lambda s: quote(str(s), safe="/")
    return templates


def create_app(
    source: StoreSource,
    settings: ViewerSettings | None = None,
    where: str | Callable[[], str] = "",
) -> Starlette:
    """The viewer over the history ``source`` gives.

    Args:
        source: called per page; a context manager yielding the ``HistoryStore``.
        settings: refresh interval, live window and the host it answers for.
        where: the history in words (or what says it, asked per page), for the header
            and the pages that say it is empty.
    """
    settings = settings or ViewerSettings()
    templates = _templates()

    def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("where", where() if callable(where) else where)
        context.setdefault("refresh_s", settings.refresh_s)
        context.setdefault("idle_refresh_s", settings.idle_refresh_s)
        resp = templates.TemplateResponse(request, name, context, status_code=status)
        resp.headers.update(_HEADERS)
        return resp

    def params(request: Request) -> dict[str, str]:
        multi = request.query_params.multi_items()
        seen: dict[str, str] = {}
        for k, v in multi:
            if k in seen:
                raise BadRequestError(f"parameter {k!r} given twice")
            seen[k] = v
        return seen

    def runs(request: Request) -> Response:
        flt = reads.RunFilter.parse(params(request))
        with source() as store:
            data = reads.runs_page(store, flt, settings.live_window_s)
        name = "_runs_table.html" if request.headers.get("HX-Request") else "runs.html"
        return page(request, name, flt=flt, data=data, columns=reads.RUN_COLUMNS)

    def run(request: Request, live: bool = False) -> Response:
        run_id = request.path_params["run_id"]
        got = params(request)
        extra = sorted(set(got) - {"k"})
        if extra:
            raise BadRequestError(f"unknown query parameter {extra[0]!r}; known: k")
        k = reads.int_param(got, "k", 1, 1, 10_000)
        with source() as store:
            data = reads.run_page(store, run_id, k, settings.live_window_s)
        name = "_run_live.html" if live else "run.html"
        return page(request, name, data=data, k=k, now=datetime.now(UTC))

    def run_live(request: Request) -> Response:
        return run(request, live=True)

    def trajectory(request: Request) -> Response:
        if request.query_params:
            raise BadRequestError("a trajectory's page takes no query parameters")
        with source() as store:
            data = trajectory_page(store, request.path_params["session_id"])
        return page(request, "trajectory.html", data=data)

    def compare(request: Request) -> Response:
        got = params(request)
        extra = sorted(set(got) - {"a", "b", "av", "bv"})
        if extra:
            raise BadRequestError(f"unknown query parameter {extra[0]!r}; known: a, av, b, bv")
        with source() as store:
            all_runs = reads.run_ids(store)
            if not got.get("a") or not got.get("b"):
                return page(request, "compare.html", runs=all_runs, got=got, result=None)
            a = comparing.CompareSide(got["a"], reads.int_param(got, "av", -1, -1, 1 << 62))
            b = comparing.CompareSide(got["b"], reads.int_param(got, "bv", -1, -1, 1 << 62))
            result = comparing.compare(store, a, b)
        return page(request, "compare.html", runs=all_runs, got=got, a=a, b=b, result=result)

    def health(request: Request) -> Response:
        return PlainTextResponse("ok", headers={VIEWER_HEADER: "1"})

    async def on_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ViewerError):
            status, title, message = exc.status, _TITLES.get(exc.status, "Error"), str(exc)
        elif isinstance(exc, HTTPException):
            status, title = exc.status_code, _TITLES.get(exc.status_code, "Error")
            message = f"no page at {request.url.path}" if status == 404 else str(exc.detail)
        elif isinstance(exc, HistoryError):
            status, title = 503, "The history cannot be read"
            message = str(exc)
        else:
            log.exception("viewer: %s %s failed", request.method, request.url.path)
            status, title = 500, "Internal error"
            message = (
                f"{type(exc).__name__} while showing this page; the viewer's log has the details"
            )
        return page(request, "error.html", status=status, title=title, message=message)

    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        Exception: on_error,
        HTTPException: on_error,
        ViewerError: on_error,
        HistoryError: on_error,
    }
    hosts = (
        ["127.0.0.1", "localhost", "[::1]", settings.host]
        if is_loopback(settings.host)
        else ["*"]  # --insecure: served to the network on purpose
    )
    return Starlette(
        routes=[
            Route("/", runs),
            Route("/runs/{run_id:path}", run),
            Route("/live/runs/{run_id:path}", run_live),
            Route("/trajectories/{session_id:path}", trajectory),
            Route("/compare", compare),
            Route("/healthz", health),
            Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
        ],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
        exception_handlers=handlers,
    )


_TITLES = {400: "Bad request", 404: "Not found", 500: "Internal error", 503: "Unavailable"}
