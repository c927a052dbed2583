"""One environment variable sets one field of one settings class: every class of ``rllm``
is walked and no variable is claimed twice; a field that moved to a variable of its own
reads only that one, and the name it read before logs a warning naming the new one."""

from __future__ import annotations

import ast
import importlib
import logging
from collections import defaultdict
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import BaseSettings

import rllm
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.serving.settings import ServeSettings
from rllm.settings import MovedEnv, OwnEnvSettings, StackSettings, env_var

VALUES = {
    "model": "/models/m",
    "gguf_file": "m.gguf",
    "device": "meta",
    "torch_threads": 3,
    "estimator": "rloo",
}
"""A valid value of each moved field, as the variable would give it."""


def _settings_classes() -> list[type[BaseSettings]]:
    """Every settings class defined in ``rllm``: the modules that define a class whose base
    ends in ``Settings`` are imported (not the whole package: torch is slow to load)."""
    root = Path(rllm.__file__).parent
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bases = [
            base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for base in node.bases
        ]
        if any(name.endswith("Settings") for name in bases):
            importlib.import_module(
                ".".join(("rllm", *path.relative_to(root).with_suffix("").parts))
            )
    found: list[type[BaseSettings]] = []
    todo = [BaseSettings]
    while todo:
        for cls in todo.pop().__subclasses__():
            todo.append(cls)
            if cls.__module__.startswith("rllm.") and cls.model_fields:
                found.append(cls)
    return found


def test_every_variable_sets_one_field_of_one_class() -> None:
    classes = _settings_classes()
    names = {cls.__name__ for cls in classes}
    assert {"StackSettings", "ServeSettings", "TrainerSettings", "GatewaySettings"} <= names
    assert {"ProcessorSettings", "ViewerSettings", "KafkaSettings"} <= names
    claims: dict[str, list[str]] = defaultdict(list)
    unread = []  # fields no variable sets (the stack's copies of its services' ports)
    for cls in classes:
        for field in cls.model_fields:
            name = f"{cls.__module__}.{cls.__qualname__}.{field}"
            var = env_var(cls, field)
            (claims[var] if var else unread).append(name)
    shared = {name: owners for name, owners in claims.items() if len(owners) > 1}
    assert shared == {}
    assert len(claims) + len(unread) == sum(len(cls.model_fields) for cls in classes)
    assert sorted(unread) == [
        f"rllm.settings.StackSettings.{port}"
        for port in ("gateway_port", "serve_port", "view_port")
    ]


def _moved() -> list[tuple[type[OwnEnvSettings], MovedEnv]]:
    return [(cls, moved) for cls in (ServeSettings, TrainerSettings) for moved in cls.moved_env]


@pytest.mark.parametrize(("cls", "moved"), _moved(), ids=lambda x: getattr(x, "new", ""))
def test_a_moved_field_reads_its_own_variable_and_the_old_one_warns(
    cls: type[OwnEnvSettings],
    moved: MovedEnv,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for each in cls.moved_env:
        monkeypatch.delenv(each.old, raising=False)
        monkeypatch.delenv(each.new, raising=False)
    default = getattr(cls(), moved.field)
    value = VALUES[moved.field]
    assert value != default
    monkeypatch.setenv(moved.old, str(value))
    with caplog.at_level(logging.WARNING, logger="rllm.settings"):
        assert getattr(cls(), moved.field) == default  # the old name no longer sets it
    now = f"it sets {moved.now}" if moved.now else "it sets nothing now"
    assert [r.getMessage() for r in caplog.records] == [
        f"{moved.old} is set but no longer sets {cls.owner}'s {moved.field} ({now}); "
        f"set {moved.new} instead"
    ]
    assert env_var(cls, moved.field) == moved.new
    caplog.clear()
    monkeypatch.setenv(moved.new, str(value))
    with caplog.at_level(logging.WARNING, logger="rllm.settings"):
        assert getattr(cls(), moved.field) == value
        assert getattr(cls(**{moved.field: default}), moved.field) == default  # a flag wins
    assert caplog.records == []  # the field is set: the old name would not have counted


def test_the_old_names_keep_one_meaning_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLLM_MODEL", "fake")
    monkeypatch.setenv("RLLM_ESTIMATOR", "rloo")
    from rllm.processors.settings import ProcessorSettings

    assert StackSettings().model == "fake"  # the stack's model profile
    assert ProcessorSettings().estimator == "rloo"  # the processors' default estimator
    assert env_var(StackSettings, "model") == "RLLM_MODEL"
    assert env_var(ProcessorSettings, "estimator") == "RLLM_ESTIMATOR"


def test_the_stack_takes_each_service_s_port_from_that_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from rllm.cli.stack import stack_settings

    for var in ("RLLM_GATEWAY_PORT", "RLLM_SERVE_PORT", "RLLM_VIEW_PORT"):
        monkeypatch.delenv(var, raising=False)
    stack = stack_settings(home=tmp_path)
    assert (stack.gateway_port, stack.serve_port, stack.view_port) == (8400, 8000, 8500)
    assert ServeSettings().serve_port == 8000  # where the gateway's upstream is by default
    monkeypatch.setenv("RLLM_GATEWAY_PORT", "18400")
    monkeypatch.setenv("RLLM_SERVE_PORT", "18000")
    monkeypatch.setenv("RLLM_VIEW_PORT", "18500")
    monkeypatch.setenv("RLLM_MODEL", "local")  # the stack's profile: the server does not warn
    with caplog.at_level(logging.WARNING, logger="rllm.settings"):
        stack = stack_settings(home=tmp_path)
    assert (stack.gateway_port, stack.serve_port, stack.view_port) == (18400, 18000, 18500)
    assert caplog.records == []
    # the stack's own class reads none of them: one variable, one field
    plain = StackSettings(home=tmp_path)
    assert (plain.gateway_port, plain.serve_port, plain.view_port) == (8400, 8000, 8500)
    assert stack_settings(home=tmp_path, serve_port=9).serve_port == 9  # a flag wins
    with pytest.raises(ValidationError, match="serve_prot"):
        StackSettings(home=tmp_path, serve_prot=1)  # type: ignore[call-arg]  # the misspelt name is the test


def test_env_var_refuses_an_unknown_field() -> None:
    with pytest.raises(ValueError, match="ServeSettings has no field 'modle'"):
        env_var(ServeSettings, "modle")
