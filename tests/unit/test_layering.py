"""Imports point down the layers of DESIGN.md: cli → app (the RL loop and the demo) →
producers, processors, consumers, serving (which never import each other) → benchmarks →
sandboxes, models → kafka → schemas; settings, errors and the small root modules are used
by all. Relative imports and ``from rllm import …`` count as the modules they name."""

from __future__ import annotations

import ast
import functools
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


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(("rllm", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _targets(root: Path, path: Path, node: ast.AST) -> list[str]:
    """The modules one import statement names, relative ones made absolute and
    ``from rllm import x`` read as ``rllm.x`` when ``x`` is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        base = node.module or ""
    else:
        package = _module_name(root, path).split(".")
        if path.name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    targets = [base]
    if base == "rllm" or node.module is None:
        for alias in node.names:
            name = f"{base}.{alias.name}"
            sub = root.joinpath(*name.split(".")[1:])
            if sub.is_dir() or sub.with_suffix(".py").is_file():
                targets.append(name)
    return targets


@functools.cache
def _imports() -> frozenset[tuple[str, str, str]]:
    """Every (module, its area, imported area) in the package, parsed once per run."""
    found = set()
    root = Path(rllm.__file__).parent
    for path in root.rglob("*.py"):
        module = ".".join(("rllm", *path.relative_to(root).with_suffix("").parts))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            for target in _targets(root, path, node):
                if target.startswith("rllm."):
                    found.add((module, _area(module), _area(target)))
    return frozenset(found)


def test_relative_and_root_imports_are_seen() -> None:
    """The reader resolves ``from .x import y`` and ``from rllm import x``."""
    root = Path(rllm.__file__).parent
    path = root / "app" / "trainer.py"
    relative = ast.parse("from .hold import served_for\nfrom . import policy").body
    assert _targets(root, path, relative[0]) == ["rllm.app.hold"]
    assert _targets(root, path, relative[1]) == ["rllm.app", "rllm.app.policy"]
    package = ast.parse("from ..kafka import publish").body[0]
    assert _targets(root, root / "app" / "__init__.py", package) == ["rllm.kafka"]
    from_root = ast.parse("from rllm import schemas, AgentTrainer").body[0]
    assert _targets(root, path, from_root) == ["rllm", "rllm.schemas"]


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


KAFKA_CLIENTS = {"confluent_kafka", "aiokafka"}
KNOWN_KAFKA_CLIENTS = {"processors/consumer.py"}
"""Modules outside ``rllm.kafka`` that may import a Kafka client library:
``processors/consumer.py`` subclasses faust's consumer, which is aiokafka's."""


def test_only_the_kafka_layer_imports_kafka_clients() -> None:
    """Components ask ``rllm.kafka`` for clients, readers and publishers; none takes a
    Kafka client library itself (confluent-kafka, aiokafka; imports inside functions count
    too)."""
    root = Path(rllm.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "kafka" or rel.as_posix() in KNOWN_KAFKA_CLIENTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = _targets(root, path, node)
            found += [str(rel) for n in names if n.split(".")[0] in KAFKA_CLIENTS]
    assert found == []


def test_the_known_kafka_client_imports_still_exist() -> None:
    root = Path(rllm.__file__).parent
    for rel in KNOWN_KAFKA_CLIENTS:
        path = root / rel
        names = {
            n.split(".")[0]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            for n in _targets(root, path, node)
        }
        assert names & KAFKA_CLIENTS, f"{rel} no longer imports a Kafka client: unlist it"
