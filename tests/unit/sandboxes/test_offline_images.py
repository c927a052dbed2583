"""Offline image names (pyenv's CPythons), refusals that list them, and image
substitution: parsing, lookup, and the eval summary's record of it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from rllm.benchmarks.harbor import load_task
from rllm.cli.main import cli
from rllm.producers.evaluation.harbor import substituted_images
from rllm.sandboxes.images.base import PYTHON_IMAGES
from rllm.sandboxes.images.derived import derived_recipe, offline_images, refusal
from rllm.sandboxes.images.pyenv import image_env, python_images, runtime_packages
from rllm.sandboxes.images.resolve import parse_substitutes, substitute
from tests.unit.benchmarks.test_harbor_task import make_task


def _pyenv(root: Path, *versions: str) -> Path:
    for version in versions:
        (root / "versions" / version / "bin").mkdir(parents=True)
        (root / "versions" / version / "bin" / "python3").write_text("")
    return root


def test_python_names_cover_pyenv_versions_suites_and_aliases(tmp_path: Path) -> None:
    images = python_images(_pyenv(tmp_path, "3.12.0", "3.12.1", "3.9.18", "3.13.0", "2.7.18"))
    assert images["python:3.12-slim-bookworm"].version == "3.12.1"  # newest patch
    assert images["python:3.12.0"].version == "3.12.0"
    assert (images["python:3.12"].suite, images["python:3.12-trixie"].suite) == (
        "bookworm",
        "trixie",
    )
    assert images["python:3"].version == images["python:slim"].version == "3.13.0"
    assert images["python:latest"].version == "3.13.0"
    assert images["python:3.9-slim-trixie"].prefix == tmp_path / "versions" / "3.9.18"
    assert not [n for n in images if "2.7" in n or "bullseye" in n or n == "python:3.10"]
    # tags 3.12.0 3.12.1 3.12 3.9.18 3.9 3.13.0 3.13 3 latest, each in six variants
    assert len(images) == 9 * 6
    assert python_images(tmp_path / "none") == {}


def test_image_env_is_the_official_images(tmp_path: Path) -> None:
    build = python_images(_pyenv(tmp_path, "3.12.1"))["python:3.12-slim"]  # no host pyenv needed
    env = image_env(build, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin")
    assert env == {
        "PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin",
        "LANG": "C.UTF-8",
        "PYTHON_VERSION": build.version,
    }
    assert "libssl3t64" in runtime_packages("trixie") and "libssl3" in runtime_packages("bookworm")


def test_refusals_name_what_builds_offline() -> None:
    listed = offline_images()
    assert listed.startswith("debian:{bookworm,bullseye,trixie}[-slim]")
    minors = sorted({b.minor for b in PYTHON_IMAGES.values()})
    assert all(m in listed for m in minors)
    why = refusal("python:3.99-slim")
    assert why is not None and "3.99" in why
    assert all(b.version in why for b in PYTHON_IMAGES.values())
    assert "glibc" in (refusal("python:3.12-slim-bullseye") or "")
    assert "--image-substitute ubuntu:24.04=debian:bookworm" in (refusal("ubuntu:24.04") or "")


def test_uv_images_are_built_from_the_same_release_s_wheel() -> None:
    """TB2 copies ``/uv /uvx`` from ``ghcr.io/astral-sh/uv:0.8.14``: an exact version has a
    recipe pinned to it; a moving tag or another path under the registry does not."""
    recipe = derived_recipe("ghcr.io/astral-sh/uv:0.8.14") or ""
    assert recipe.startswith("FROM python:3.11-slim\n")
    assert '"uv==0.8.14"' in recipe
    assert "uv-0.8.14.data/scripts && install -m 0755 uv uvx /" in recipe
    assert derived_recipe("ghcr.io/astral-sh/uv:0.8.15") != recipe
    assert derived_recipe("ghcr.io/astral-sh/uv:latest") is None
    assert derived_recipe("ghcr.io/astral-sh/uv:0.8.14-alpine") is None
    assert derived_recipe("ghcr.io/astral-sh/ruff:0.8.14") is None
    assert "exact uv release" in (refusal("ghcr.io/astral-sh/uv:latest") or "")
    assert "ghcr.io/astral-sh/uv:X.Y.Z" in offline_images()


def test_substitute_warns_naming_both(caplog: pytest.LogCaptureFixture) -> None:
    subs = parse_substitutes(["ubuntu:24.04=debian:trixie", " docker.io/library/x:1 = y "])
    assert subs == {"ubuntu:24.04": "debian:trixie", "docker.io/library/x:1": "y"}
    with caplog.at_level(logging.WARNING):
        assert substitute("docker.io/library/ubuntu:24.04", subs) == (
            "debian:trixie",
            "docker.io/library/ubuntu:24.04",
        )
        assert substitute("debian:bookworm", subs) == ("debian:bookworm", None)
    assert [r.getMessage() for r in caplog.records] == [
        "image docker.io/library/ubuntu:24.04 is substituted by debian:trixie, as the user asked"
    ]
    with pytest.raises(ValueError, match="IMAGE=SUBSTITUTE"):
        parse_substitutes(["ubuntu"])


def test_the_eval_summary_names_substituted_task_images(tmp_path: Path) -> None:
    tasks = [
        load_task(make_task(tmp_path, "a", dockerfile="ARG V=24.04\nFROM ubuntu:${V}\n")),
        load_task(make_task(tmp_path, "b")),  # FROM debian:bookworm
        load_task(
            make_task(
                tmp_path,
                "c",
                dockerfile=None,
                toml='version = "1.0"\n[environment]\ndocker_image = "python:3.10"\n',
            )
        ),
    ]
    subs = {"ubuntu:24.04": "debian:trixie", "python:3.10": "python:3.12", "z": "y"}
    assert substituted_images(tasks, subs) == {
        "ubuntu:24.04": "debian:trixie",
        "python:3.10": "python:3.12",
    }
    assert substituted_images(tasks, {}) == {}


@pytest.mark.parametrize(
    "args",
    [
        ["sandbox", "image", "build", "."],
        ["sandbox", "run", "true"],
        ["eval", "x", "--tasks-dir", "."],
    ],
)
def test_a_malformed_image_substitute_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--image-substitute", "ubuntu"])
    assert result.exit_code == 2, result.output
    assert "IMAGE=SUBSTITUTE" in result.output
