"""Image references read as Docker reads them: Docker Hub defaults, hosts, tags, digests."""

from __future__ import annotations

import pytest

from rllm.sandboxes.images.reference import ImageReference, is_loopback, parse_reference

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest", "familiar"),
    [
        ("python", "docker.io", "library/python", "latest", None, "python:latest"),
        ("python:3.11", "docker.io", "library/python", "3.11", None, "python:3.11"),
        ("library/python:3.11", "docker.io", "library/python", "3.11", None, "python:3.11"),
        ("docker.io/python:3.11", "docker.io", "library/python", "3.11", None, "python:3.11"),
        (
            "index.docker.io/library/debian",
            "docker.io",
            "library/debian",
            "latest",
            None,
            "debian:latest",
        ),
        (
            "registry-1.docker.io/bitnami/redis:7",
            "docker.io",
            "bitnami/redis",
            "7",
            None,
            "bitnami/redis:7",
        ),
        ("someuser/tool:v1.2", "docker.io", "someuser/tool", "v1.2", None, "someuser/tool:v1.2"),
        ("ghcr.io/o/r", "ghcr.io", "o/r", "latest", None, "ghcr.io/o/r:latest"),
        ("localhost/x:1", "localhost", "x", "1", None, "localhost/x:1"),
        (
            "127.0.0.1:5000/some/image:tag",
            "127.0.0.1:5000",
            "some/image",
            "tag",
            None,
            "127.0.0.1:5000/some/image:tag",
        ),
        ("[::1]:5000/a:b", "[::1]:5000", "a", "b", None, "[::1]:5000/a:b"),
        ("python@" + DIGEST, "docker.io", "library/python", None, DIGEST, "python@" + DIGEST),
        (
            "python:3.13@" + DIGEST,
            "docker.io",
            "library/python",
            "3.13",
            DIGEST,
            "python:3.13@" + DIGEST,
        ),
        (
            "reg:5000/a/b-c__d.e",
            "reg:5000",
            "a/b-c__d.e",
            "latest",
            None,
            "reg:5000/a/b-c__d.e:latest",
        ),
    ],
)
def test_parse(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None, familiar: str
) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        digest,
    )
    assert ref.familiar == familiar == str(ref)
    assert parse_reference(ref.canonical) == ref
    assert parse_reference(ref.familiar) == ref


def test_canonical_and_api_host() -> None:
    ref = parse_reference("python:3.11")
    assert ref.canonical == "docker.io/library/python:3.11"
    assert ref.api_host == "registry-1.docker.io"
    assert ref.is_docker_hub
    other = parse_reference("ghcr.io/o/r:1")
    assert other.api_host == "ghcr.io" and not other.is_docker_hub


def test_on_a_mirror_keeps_the_library_path() -> None:
    mirrored = parse_reference("python:3.13-slim-bookworm").on("127.0.0.1:5000")
    assert mirrored == ImageReference("127.0.0.1:5000", "library/python", "3.13-slim-bookworm")
    assert mirrored.familiar == "127.0.0.1:5000/library/python:3.13-slim-bookworm"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not an image reference"),
        (" python", "not an image reference"),
        ("Python:3.11", "upper case"),
        ("ghcr.io/Owner/r", "upper case"),
        ("python:", "not a valid tag"),
        ("python:-x", "not a valid tag"),
        ("a//b", "invalid component"),
        ("python@sha256:abc", "not a digest"),
        ("python@sha256:" + "AB" * 32, "64 lower-case hex"),
        ("bad_host:x:5000/a", "not a registry host"),
    ],
)
def test_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_reference(text)


@pytest.mark.parametrize(
    ("registry", "loopback"),
    [
        ("127.0.0.1:5000", True),
        ("127.3.2.1", True),
        ("localhost:80", True),
        ("[::1]:5000", True),
        ("10.0.0.1:5000", False),
        ("ghcr.io", False),
        ("docker.io", False),
    ],
)
def test_is_loopback(registry: str, loopback: bool) -> None:
    assert is_loopback(registry) is loopback
