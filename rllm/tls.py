"""One TLS context per process for every HTTP client we create.

httpx builds a fresh ``ssl.SSLContext`` for each client unless given one, and building one
loads the CA bundle: 25 ms of CPU on a free core, 100-170 ms on a busy 2-core machine,
with the GIL held. Clients made per batch or per poll (the SDK's gateway client, the
agents' model calls, AgentTrainer's wait for a served version) paid that each time.
"""

from __future__ import annotations

import functools
import ssl

__all__ = ["shared_tls"]


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """The process's default-verifying TLS context (built once)."""
    return ssl.create_default_context()
