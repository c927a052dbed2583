"""The benchmark registry: entries by name and alias, filled from ``catalog`` modules."""

from __future__ import annotations

import difflib
import importlib
import re
from typing import Any

from rllm.benchmarks.errors import NameTakenError, UnknownBenchmarkError
from rllm.benchmarks.types import BenchmarkSpec, Category

__all__ = [
    "BenchmarkKind",
    "all_benchmarks",
    "benchmark_kind",
    "benchmark_names",
    "get_benchmark",
    "register_benchmarks",
]

_SPECS: dict[str, BenchmarkSpec] = {}
_ALIASES: dict[str, str] = {}
_CATALOG = (
    "maths",
    "code",
    "choice",
    "qa",
    "instruct",
    "translation",
    "search",
    "vision",
    "agentic",
)
_loaded = False


def _key(name: str) -> str:
    """Lookup key: case, dashes, dots and spaces do not matter (``MATH-500`` == ``math500``)."""
    return re.sub(r"[\s_.\-]+", "", name.lower())


class BenchmarkKind:
    """A builder for one kind of catalog entry: the kind's shared settings, which an entry
    may override, so that each entry states only what sets it apart.

    An entry's ``meta=("level",)`` maps the optional column ``level`` to the variable of
    that name and copies it into the task's metadata (``optional`` plus ``metadata``).
    """

    def __init__(self, category: Category, **shared: Any) -> None:
        self.category = category
        self.shared = shared

    def variant(self, **more: Any) -> BenchmarkKind:
        """A narrower kind: these settings on top of this kind's."""
        return BenchmarkKind(self.category, **(self.shared | more))

    def __call__(
        self,
        name: str,
        title: str,
        hf_id: str | None = None,
        fields: dict[str, str] | None = None,
        *,
        meta: tuple[str, ...] = (),
        **kw: Any,
    ) -> BenchmarkSpec:
        given = {"hf_id": hf_id, "fields": fields}
        settings = self.shared | {k: v for k, v in given.items() if v is not None} | kw
        if meta:
            settings["optional"] = settings.get("optional", {}) | {var: var for var in meta}
            settings["metadata"] = (*settings.get("metadata", ()), *meta)
        return BenchmarkSpec(name=name, title=title, category=self.category, **settings)


def benchmark_kind(category: Category, **shared: Any) -> BenchmarkKind:
    """The builder of one kind of entry (see ``BenchmarkKind``)."""
    return BenchmarkKind(category, **shared)


def register_benchmarks(*specs: BenchmarkSpec) -> None:
    """Add entries; a name or alias already taken by another entry is refused.

    Raises:
        NameTakenError: naming the label, its entry and the entry that has it.
    """
    for spec in specs:
        for label in (spec.name, *spec.aliases):
            owner = _ALIASES.get(_key(label))
            if owner is not None and owner != spec.name:
                raise NameTakenError(
                    f"benchmark name {label!r} of {spec.name!r} is taken by {owner!r}"
                )
        _SPECS[spec.name] = spec
        for label in (spec.name, *spec.aliases):
            _ALIASES[_key(label)] = spec.name


def _load_catalog() -> None:
    global _loaded
    if not _loaded:
        for module in _CATALOG:
            importlib.import_module(f"rllm.benchmarks.catalog.{module}")
        _loaded = True


def get_benchmark(name: str) -> BenchmarkSpec:
    """The entry named ``name`` or one of its aliases.

    Raises:
        UnknownBenchmarkError: naming the value and the closest known names.
    """
    _load_catalog()
    owner = _ALIASES.get(_key(name))
    if owner is not None:
        return _SPECS[owner]
    labels = sorted({*_SPECS, *(a for s in _SPECS.values() for a in s.aliases)})
    close = difflib.get_close_matches(name.lower(), [x.lower() for x in labels], n=5, cutoff=0.5)
    by_key = [lab for lab in labels if _key(name) in _key(lab)][:5]
    hints = list(dict.fromkeys([*close, *by_key]))[:5]
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    raise UnknownBenchmarkError(
        f"unknown benchmark {name!r}{hint} (see `rllm-cli bench list` for all {len(_SPECS)})"
    )


def all_benchmarks(category: Category | str | None = None) -> list[BenchmarkSpec]:
    """Every entry (of one category when given), sorted by category then name."""
    _load_catalog()
    wanted = Category(category) if category is not None else None
    specs = [s for s in _SPECS.values() if wanted is None or s.category == wanted]
    order = list(Category)
    return sorted(specs, key=lambda s: (order.index(s.category), s.name))


def benchmark_names() -> list[str]:
    """Every canonical name, sorted."""
    _load_catalog()
    return sorted(_SPECS)
