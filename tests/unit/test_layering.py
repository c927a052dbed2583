"""Imports point down the layers of DESIGN.md: cli → app (the RL loop and the demo) → producers, processors, consumers, serving
(which never import each other) → benchmarks → sandboxes, models → kafka → schemas;
settings, errors and the small root modules are used by all."""

from __future__ import annotations

import ast
from pathlib import Path

import rllm

RANKS = {
    "schemas": 0,
    "kafka": 1,
    "sandboxes": 2,
    "models": 2,
    "benchmarks": 3,
    "infra": 3,
    "producers": 4,
    "processors": 4,
    "consumers": 4,
    "serving": 4,
    "app": 5,
    "cli": 7,
}
ROOT_MODULES = {"settings", "errors", "tls"}
KNOWN: set[tuple[str, str]] = set()
"""Arrows that still run sideways, each with an open issue."""


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports() -> set[tuple[str, str, str]]:
    found = set()
    root = Path(rllm.__file__).parent
    for path in root.rglob("*.py"):
        module = ".".join(("rllm", *path.relative_to(root).with_suffix("").parts))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                if target.startswith("rllm."):
                    found.add((module, _area(module), _area(target)))
    return found


def test_the_root_modules_import_no_area() -> None:
    """settings, errors and tls sit under every area: an import of an area from one of
    them (even inside a function) ties the bottom to the top."""
    up = sorted((m, t) for m, a, t in _imports() if a in ROOT_MODULES and t in RANKS)
    assert up == []


def test_every_area_has_a_rank() -> None:
    areas = {a for _m, a, _t in _imports()} | {t for _m, _a, t in _imports()}
    assert areas - set(RANKS) - ROOT_MODULES - {"__init__", ""} == set()


def test_imports_point_down_the_layers() -> None:
    wrong = sorted(
        (module, target)
        for module, area, target in _imports()
        if area in RANKS
        and target in RANKS
        and target != area
        and RANKS[target] >= RANKS[area]
        and (area, target) not in KNOWN
    )
    assert wrong == []


def test_the_known_exceptions_still_exist() -> None:
    """When one is fixed, take it off ``KNOWN`` so it cannot come back."""
    present = {(area, target) for _m, area, target in _imports()}
    assert present >= KNOWN


def test_the_server_and_the_local_backend_share_the_model_runtime() -> None:
    """``serving`` loads its model through ``models``, as the local backend does, and
    takes nothing from ``consumers``."""
    found = _imports()
    arrows = {(area, target) for _m, area, target in found}
    assert ("serving", "models") in arrows
    sideways = sorted(m for m, area, target in found if (area, target) == ("serving", "consumers"))
    assert sideways == []
    local = {t for m, _a, t in found if m.startswith("rllm.consumers.backends.local.")}
    assert "models" in local


def test_only_the_kafka_layer_imports_confluent_kafka() -> None:
    """Components ask ``rllm.kafka`` for clients, readers and publishers; none takes the
    Kafka client library itself (imports inside functions count too)."""
    root = Path(rllm.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "kafka":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [str(rel) for n in names if n.split(".")[0] == "confluent_kafka"]
    assert found == []
