"""The error tree drawn in ``rllm/errors.py`` is the tree of classes: every exception class
in the package is an ``RllmError``, drawn once under its parent with its other parents in
parentheses, and defined in its area's ``errors.py``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import rllm
import rllm.errors
from rllm.errors import RllmError

_LINE = re.compile(
    r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)(?:\((?P<extra>[\w, ]+)\))?"
)


def _classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(rllm.__path__, "rllm."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
            ):
                qual = f"{obj.__module__}.{obj.__name__}"
                found[qual] = obj
    return found


def _tree() -> list[tuple[str, str, set[str]]]:
    """``(name, drawn parent, other parents)`` per line of the drawn tree."""
    doc = rllm.errors.__doc__ or ""
    lines = doc.split("    RllmError\n", 1)[1].split("\n\n", 1)[0].splitlines()
    stack = ["RllmError"]
    out = []
    for raw in lines:
        match = _LINE.match(raw[4:])
        assert match, f"not a line of the tree: {raw!r}"
        depth = len(match["indent"]) // 4
        del stack[depth + 1 :]
        extra = {e.strip() for e in (match["extra"] or "").split(",") if e.strip()}
        out.append((match["name"], stack[depth], extra))
        stack.append(match["name"])
    return out


def test_every_error_class_is_an_rllm_error() -> None:
    strays = sorted(q for q, cls in _classes().items() if not issubclass(cls, RllmError))
    assert strays == []


def test_the_drawn_tree_is_the_class_tree() -> None:
    classes = {cls.__name__: cls for cls in _classes().values()}
    tree = _tree()
    names = [name for name, _parent, _extra in tree]
    assert len(names) == len(set(names)), "a class is drawn twice"
    assert sorted(set(classes) - {"RllmError"}) == sorted(names)
    for name, parent, extra in tree:
        bases = {b.__name__ for b in classes[name].__bases__}
        assert parent in bases, f"{name} is drawn under {parent}, its bases are {bases}"
        assert extra == bases - {parent}, f"{name}: drawn with {extra}, bases {bases}"


def test_each_area_defines_its_errors_in_its_errors_module() -> None:
    misplaced = sorted(q for q, cls in _classes().items() if not cls.__module__.endswith(".errors"))
    assert misplaced == []
