"""Free loopback ports for the services the tests and perf scripts start."""

from __future__ import annotations

import socket

__all__ = ["free_broker_port", "free_ports"]


def free_broker_port() -> int:
    """A free port on 127.0.0.1 whose next port is free too (a broker's controller takes
    port + 1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port + 1))
        except OSError:
            return free_broker_port()
    return port


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count >= 65536:
            continue
        socks = []
        try:
            for p in range(first, first + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return first
    raise AssertionError(f"no {count} consecutive free ports on 127.0.0.1")
