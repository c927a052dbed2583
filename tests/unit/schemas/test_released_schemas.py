"""Bytes written with an earlier release of the schemas still decode: the codec bundles
each release's schemas (``rllm/schemas/avro/released/``), the golden bytes of each release
stay under ``tests/unit/schemas/golden/released/``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rllm.schemas import registry
from rllm.schemas.codec import AvroCodec
from tests.samples import SAMPLES

GOLDEN = Path(__file__).parent / "golden"
OLD_BYTES = sorted((GOLDEN / "released").glob("v*/*.bin"))


@pytest.mark.parametrize("path", OLD_BYTES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_bytes_of_an_earlier_release_decode_to_the_sample(path: Path) -> None:
    data = path.read_bytes()
    decoded = AvroCodec().decode(data)
    assert decoded == SAMPLES[path.stem]  # fields added since take their defaults


def test_some_released_bytes_were_written_with_a_schema_that_changed_since() -> None:
    changed = [
        p.stem
        for p in OLD_BYTES
        if p.read_bytes()[2:10] != registry.fingerprint64(registry.expanded(p.stem))
    ]
    assert sorted(changed) == [
        "EpisodeAssembled",
        "SessionEvent",
        "StepCaptured",
        "TrajectoryAssembled",
    ]


def test_the_bundled_releases_are_the_snapshots_the_compatibility_test_reads() -> None:
    bundled = {
        (p.parent.name, p.name): json.loads(p.read_text())
        for p in registry.RELEASED_DIR.glob("v*/*.json")
    }
    for (version, name), schema in bundled.items():
        snapshot = json.loads((GOLDEN / "schemas" / version / name).read_text())
        assert registry.fingerprint64(schema) == registry.fingerprint64(snapshot), name
    assert {v for v, _ in bundled} == {"v1"}
    assert len(registry.released()) == len(bundled) == 12
