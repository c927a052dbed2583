"""Write the golden bytes of every sample record and a snapshot of each expanded schema.

Run only when a schema change is intended (``python -m tests.unit.schemas.golden.regenerate``);
keep the old schema snapshots in ``schemas/v*/`` so the compatibility test still reads them.
A change releases a new version: first copy the golden bytes to ``released/v<old>/`` (the
test that old bytes still decode reads them) and the old snapshot to
``rllm/schemas/avro/released/v<old>/`` (the codec decodes with it), then bump ``VERSION``.
"""

from __future__ import annotations

import json
from pathlib import Path

from rllm.schemas.codec import AvroCodec
from rllm.schemas.registry import RECORD_NAMES, expanded
from tests.samples import SAMPLES

HERE = Path(__file__).parent
VERSION = "v2"
"""The release the current ``.avsc`` files are (v2: ``StepCaptured.request_prefix_len``
and ``request_suffix_len``)."""


def main() -> None:
    codec = AvroCodec()
    for name, sample in SAMPLES.items():
        (HERE / f"{name}.bin").write_bytes(codec.encode(sample))
    snap = HERE / "schemas" / VERSION
    snap.mkdir(parents=True, exist_ok=True)
    for name in RECORD_NAMES:
        (snap / f"{name}.json").write_text(json.dumps(expanded(name), indent=1) + "\n")


if __name__ == "__main__":
    main()
