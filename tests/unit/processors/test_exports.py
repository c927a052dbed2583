"""Every name in the processors' ``__all__`` lists resolves."""

from __future__ import annotations

import importlib
import pkgutil

import rllm.processors


def test_all_names_resolve() -> None:
    modules = ["rllm.processors"] + [
        f"rllm.processors.{m.name}" for m in pkgutil.iter_modules(rllm.processors.__path__)
    ]
    for name in modules:
        module = importlib.import_module(name)
        for attr in module.__all__:
            assert hasattr(module, attr), f"{name}.{attr}"
