"""Every module imports, and every name in every ``__all__`` resolves."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import rllm

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(rllm.__path__, "rllm.") if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_every_all_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which does not exist"


def test_root_api_is_tiny() -> None:
    assert {"Step", "Trajectory", "Episode"} <= set(rllm.__all__)
    assert len(rllm.__all__) <= 10


def test_type_checkers_see_the_lazy_root_names() -> None:
    """``rllm/__init__.py`` imports under ``TYPE_CHECKING`` exactly what its ``__getattr__``
    loads on first use, and ships ``py.typed``, so mypy and pyright see
    ``rllm.AgentTrainer``."""
    import ast
    from pathlib import Path

    root = Path(rllm.__file__).parent
    tree = ast.parse((root / "__init__.py").read_text(encoding="utf-8"))
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    ]
    typed = {
        alias.name: (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == rllm._LAZY
    assert (root / "py.typed").is_file()
