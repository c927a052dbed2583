"""Which image a name means here: the store's, one pulled per the pull policy, or a
substitute the user named (never applied silently).

The local backend and the local builder both ask ``find_or_pull``; each then falls back
to its offline recipes (debootstrap bases, built-in derived images) when the policy
forbids a pull or the registry cannot be reached.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from rllm.sandboxes.errors import RegistryUnreachableError
from rllm.sandboxes.images.pull import PULLED_FROM_LABEL, pull_image
from rllm.sandboxes.images.reference import parse_reference
from rllm.sandboxes.images.store import ImageStore, LocalImage
from rllm.sandboxes.settings import PullPolicy, SandboxSettings

__all__ = [
    "SUBSTITUTED_LABEL",
    "find_or_pull",
    "parse_substitutes",
    "substitute",
    "substitution_for",
]

log = logging.getLogger(__name__)

SUBSTITUTED_LABEL = "rllm.substituted-from"
"""On an image, a build or a sandbox that a substitute stood in for: the name asked for."""


def parse_substitutes(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``["ubuntu:24.04=debian:trixie"]`` as a map; ``ValueError`` naming a bad pair."""
    out = {}
    for pair in pairs:
        wanted, sep, used = pair.partition("=")
        if not sep or not wanted.strip() or not used.strip():
            raise ValueError(f"{pair!r} is not IMAGE=SUBSTITUTE (ubuntu:24.04=debian:trixie)")
        out[wanted.strip()] = used.strip()
    return out


def substitution_for(name: str, substitutes: Mapping[str, str]) -> str | None:
    """The substitute named for ``name`` (as written, or in Docker Hub's short form), or
    None; logs nothing (``substitute`` does)."""
    candidates = [name]
    with contextlib.suppress(ValueError):  # not a reference: only the name as written
        candidates.append(parse_reference(name).familiar)
    return next((substitutes[c] for c in candidates if c in substitutes), None)


def substitute(name: str, substitutes: Mapping[str, str]) -> tuple[str, str | None]:
    """The image to use for ``name`` and, when a substitute is used, ``name``; logs a
    WARNING each time."""
    used = substitution_for(name, substitutes)
    if used is None:
        return name, None
    log.warning("image %s is substituted by %s, as the user asked", name, used)
    return used, name


def find_or_pull(store: ImageStore, name: str, settings: SandboxSettings) -> LocalImage | None:
    """The store's image of ``name`` or, per ``settings.pull_policy``, one pulled from its
    registry; None when the store lacks it and no pull may be tried.

    Raises:
        PullError: the pull failed (``RegistryUnreachableError`` when the registry did
            not answer and the store had no copy).
    """
    try:
        familiar: str | None = parse_reference(name).familiar
    except ValueError:
        familiar = None
    found = store.find(name) or (store.find(familiar) if familiar else None)
    policy = settings.pull_policy
    if found is not None and (policy != PullPolicy.ALWAYS or PULLED_FROM_LABEL not in found.labels):
        return found
    if policy == PullPolicy.NEVER or familiar is None:
        return found
    try:
        return pull_image(store, name, settings)
    except RegistryUnreachableError as exc:
        if found is None:
            raise
        log.warning("using the stored %s: pulling it again failed: %s", name, exc)
        return found
