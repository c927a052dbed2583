"""``rllm.processors.consumer`` overrides faust methods (some private) written against one
faust release; pyproject pins it. These tests fail loudly when faust is another version or
when a method we override changes its signature, before the overrides silently stop
being called or are called with other arguments."""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from typing import Any

import faust

from rllm.processors.consumer import GuardedApp, GuardedConsumer
from tests.paths import ROOT

PYPROJECT = ROOT / "pyproject.toml"

# The faust method each override replaces, with its signature in the pinned release.
FAUST_SIGNATURES = {
    (GuardedConsumer, "__init__"): "(self, *args: Any, **kwargs: Any) -> None",
    (GuardedConsumer, "on_partitions_revoked"): (
        "(self, revoked: Set[faust.types.tuples.TP]) -> None"
    ),
    (GuardedConsumer, "on_partitions_assigned"): (
        "(self, assigned: Set[faust.types.tuples.TP], generation_id: int = 0) -> None"
    ),
    (GuardedConsumer, "perform_seek"): "(self) -> None",
    (GuardedConsumer, "resume_flow"): "(self) -> None",
    (GuardedConsumer, "seek"): "(self, partition: faust.types.tuples.TP, offset: int) -> None",
    (GuardedConsumer, "_drain_messages"): "(self, fetcher: mode.types.services.ServiceT) -> None",
    (GuardedConsumer, "verify_recovery_event_path"): (
        "(self, now: float, tp: faust.types.tuples.TP) -> None"
    ),
    (GuardedConsumer, "_new_offset"): "(self, tp: faust.types.tuples.TP) -> Optional[int]",
    (GuardedConsumer, "ack"): "(self, message: faust.types.tuples.Message) -> bool",
    (GuardedApp, "_new_transport"): "(self) -> faust.types.transports.TransportT",
}


def _faust_pin() -> str:
    match = re.search(r'"faust-streaming==([^"]+)"', PYPROJECT.read_text())
    assert match, f"pyproject.toml must pin faust-streaming exactly ({PYPROJECT})"
    return match.group(1)


def _overridden(cls: type) -> dict[str, Any]:
    """Each method ``cls`` defines that a base class defines too: name -> the base's."""
    found: dict[str, Any] = {}
    for name, member in vars(cls).items():
        if not callable(member) or (name.startswith("__") and name != "__init__"):
            continue
        for base in cls.__mro__[1:]:
            if name in vars(base):
                found[name] = vars(base)[name]
                break
    return found


def test_installed_faust_is_the_pinned_release() -> None:
    assert version("faust-streaming") == _faust_pin(), (
        "faust-streaming is not the release rllm.processors.consumer was written against: "
        "check every override in FAUST_SIGNATURES against the new faust, then move the pin"
    )
    assert faust.__version__ == _faust_pin()


def test_every_override_is_listed() -> None:
    for cls in (GuardedConsumer, GuardedApp):
        listed = {name for (owner, name) in FAUST_SIGNATURES if owner is cls}
        assert set(_overridden(cls)) == listed, f"{cls.__name__}: list its faust overrides"


def test_overridden_faust_methods_keep_their_signatures() -> None:
    for (cls, name), expected in FAUST_SIGNATURES.items():
        base_method = _overridden(cls)[name]
        got = str(inspect.signature(base_method))
        assert got == expected, (
            f"faust changed {cls.__name__}.{name}'s base signature to {got}, "
            f"the override was written for {expected}"
        )
