"""Reading the hosted backends' source for the SDK calls they make, and checking each
against the installed SDK (``inspect.signature(...).bind``): the shared part of the
``test_*_sdk_names`` tests."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import modal
import pytest
from modal.container_process import ContainerProcess
from modal.io_streams import StreamReader
from modal.sandbox.sandbox import SandboxFilesystem

__all__ = ["calls", "check_call", "checked_calls", "dotted"]

_MISSING = object()

PROPERTIES: dict[tuple[Any, str], Any] = {
    (modal.Sandbox, "filesystem"): SandboxFilesystem,
    (ContainerProcess, "stdout"): StreamReader,
    (ContainerProcess, "stderr"): StreamReader,
}
"""Properties of SDK objects and the classes they return."""


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _resolve(chain: str, receivers: dict[str, Any]) -> tuple[str, Any] | None:
    """The real object a dotted call target names, or None when it is not an SDK call."""
    awaited = chain.endswith(".aio")
    chain = chain.removesuffix(".aio")
    parts = chain.split(".")
    for cut in range(len(parts), 0, -1):
        root = ".".join(parts[:cut])
        if root in receivers:
            obj = receivers[root]
            for attr in parts[cut:]:
                if (obj, attr) in PROPERTIES:
                    obj = PROPERTIES[(obj, attr)]
                    continue
                if attr in (getattr(obj, "model_fields", None) or {}):
                    return None  # a data field (a str, a dict): what it is called is not ours
                found = getattr(obj, attr, _MISSING)
                assert found is not _MISSING, f"{chain}: the installed SDK has no {attr!r} on {obj}"
                obj = found
            assert not awaited or hasattr(obj, "aio"), f"{chain} has no .aio form in the SDK"
            return chain, obj
    return None


def calls(package: Any, receivers: dict[str, Any], names: set[str]) -> Iterator[Any]:
    """(file, call node, dotted target, real object) of every SDK call in ``package``."""
    for path in Path(package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            chain = dotted(node.func)
            if chain is None:
                continue
            if chain in names:
                chain = f"daytona.{chain}"
            resolved = _resolve(chain, receivers)
            if resolved is not None:
                yield path.name, node, *resolved


def check_call(where: str, node: ast.Call, chain: str, target: Any) -> None:
    """Fail unless ``target`` accepts the call's keywords (and positional count)."""
    if not callable(target) or (isinstance(target, type) and issubclass(target, BaseException)):
        return
    if hasattr(target, "aio"):
        target = target.aio
    signature = inspect.signature(target)
    params = list(signature.parameters.values())
    starred = any(isinstance(a, ast.Starred) for a in node.args)
    args: list[Any] = [None] * (0 if starred else len(node.args))
    if params and params[0].name in ("self", "cls") and not isinstance(target, type):
        args.insert(0, None)
    kwargs = {k.arg: None for k in node.keywords if k.arg is not None}
    try:
        if starred:
            signature.bind_partial(*args, **kwargs)
        else:
            signature.bind(*args, **kwargs)
    except TypeError as exc:
        pytest.fail(f"{where}:{node.lineno} {chain}({', '.join(kwargs)}): {exc}")


def checked_calls(package: Any, receivers: dict[str, Any], names: set[str]) -> set[str]:
    """Check every SDK call in ``package`` (``check_call``); the dotted targets seen."""
    seen = set()
    for where, node, chain, target in calls(package, receivers, names):
        check_call(where, node, chain, target)
        seen.add(chain)
    return seen
