"""The gateway forwarder: makes one host ``host:port`` (the model gateway) reachable at
the same address inside a sandbox's network namespace, and nothing else.

Design: a short-lived host thread enters the sandbox's network namespace
(``setns(CLONE_NEWNET)`` on ``/proc/PID/ns/net``), creates the listening socket there and
exits; a socket keeps the namespace it was made in, so the host's event loop then
serves it (accept, connect to the real gateway from the host's namespace, copy bytes).
Nothing runs inside the sandbox, no Unix socket is bind-mounted, no image needs a tool,
and the URL an agent is given works unchanged inside. Starting one costs about 0.2 ms
(a Unix-socket bridge with a relay process inside costs a process per sandbox and
several ms to start). Any backend whose sandboxes have a network namespace the host can
open (local's bubblewrap, a docker container's ``/proc/<pid>/ns/net``) can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import threading
from urllib.parse import urlsplit

from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.local.syscalls import CLONE_NEWNET, setns

__all__ = ["GatewayForwarder", "gateway_address"]

_CHUNK = 65536


def gateway_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of a gateway URL; the host must be a loopback address.

    Raises:
        SandboxError: the host is not loopback (a sandbox's namespace has only ``lo``).
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if host == "localhost":
        return "127.0.0.1", port
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise SandboxError(
            f"gateway_url {url!r}: its host {host!r} is not a loopback address; a sandbox "
            f"with network='gateway' has only loopback, so give the gateway's 127.0.0.1 URL"
        )
    return host, port


class GatewayForwarder:
    """Listens at ``listen`` inside a network namespace and forwards to ``target`` on
    the host. ``await start()``, then ``await aclose()`` (or ``close()`` from sync code)."""

    def __init__(self, netns: str, target: tuple[str, int], listen: tuple[str, int] | None = None):
        """Args:
        netns: the namespace's path (``/proc/PID/ns/net``).
        target: where connections go on the host (the gateway).
        listen: where to listen inside; default the same address as ``target``.
        """
        self.netns = netns
        self.target = target
        self.listen = listen or target
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> GatewayForwarder:
        """Bind inside the namespace and start serving; returns self.

        Raises:
            SandboxError: the namespace cannot be entered or the address is taken.
        """
        sock = await asyncio.to_thread(_listen_in, self.netns, self.listen)
        self._server = await asyncio.start_server(self._serve, sock=sock)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            up_reader, upstream = await asyncio.open_connection(*self.target)
            self._writers.add(upstream)
            await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for end in (writer, upstream):
                if end is not None:
                    self._writers.discard(end)
                    end.close()
            if task is not None:
                self._tasks.discard(task)

    def close(self) -> None:
        """Stop listening and drop every connection (sync; for finalizers)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()
        for task in list(self._tasks):
            task.cancel()

    async def aclose(self) -> None:
        """``close`` and wait until the listener and every connection are gone."""
        tasks = list(self._tasks)
        self.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


def _listen_in(netns: str, address: tuple[str, int]) -> socket.socket:
    """A listening socket made inside ``netns``, by a thread that then exits (a thread
    that changed namespace must not serve anything else)."""
    result: list[socket.socket | BaseException] = []

    def run() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                setns(fd, CLONE_NEWNET)
            finally:
                os.close(fd)
            family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(address)
                sock.listen(128)
                sock.setblocking(False)
            except BaseException:
                sock.close()
                raise
            result.append(sock)
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=run, name="rllm-forward-setns", daemon=True)
    thread.start()
    thread.join()
    outcome = result[0]
    if isinstance(outcome, BaseException):
        raise SandboxError(
            f"cannot listen at {address[0]}:{address[1]} in the network namespace {netns}: "
            f"{outcome}"
        ) from outcome
    return outcome
