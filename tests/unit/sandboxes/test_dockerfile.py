"""The Dockerfile parser, planner, build context and layer writer: pure logic and files
on the host, no sandbox."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from rllm.sandboxes.errors import DockerfileError, ImageError
from rllm.sandboxes.images.build import build_image, resolve_from
from rllm.sandboxes.images.context import BuildContext, apply_copy, owner
from rllm.sandboxes.images.derived import derived_recipe, normalize_name
from rllm.sandboxes.images.dockerfile import parse_dockerfile
from rllm.sandboxes.images.importer import import_rootfs
from rllm.sandboxes.images.plan import base_image, plan_build, stages
from rllm.sandboxes.images.rootfs import LayerView, LayerWriter
from rllm.sandboxes.images.steps import BuildPlan, CopyStep, RunStep, WorkdirStep
from rllm.sandboxes.images.store import ImageConfig, ImageStore
from rllm.sandboxes.images.words import expand, expand_words
from tests.paths import ROOT

root_only = pytest.mark.usefixtures("as_root")
"""Layers keep owners, so these need root (as CI and the sandboxes run): they fail
without it rather than skip."""


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("layers keep owners: run the sandbox tests as root")


def plan(text: str, env: dict[str, str] | None = None, **build_args: str) -> BuildPlan:
    return plan_build(parse_dockerfile(text), ImageConfig(env=env or {}), build_args)


# --- parsing -------------------------------------------------------------------------


def test_comments_directives_and_continuations() -> None:
    text = (
        "# syntax=docker/dockerfile:1\n"
        "# a comment\n"
        "FROM debian:bookworm\n"
        "\n"
        "RUN apt-get update \\\n"
        "# a comment inside the continuation\n"
        "    && echo done\n"
        'CMD ["python3", "-m", "http.server"]\n'
        "run echo lower-case keyword\n"
    )
    instructions = parse_dockerfile(text, "ctx/Dockerfile")
    assert [(i.keyword, i.line) for i in instructions] == [
        ("FROM", 3),
        ("RUN", 5),
        ("CMD", 8),
        ("RUN", 9),
    ]
    assert instructions[1].args == "apt-get update     && echo done"
    assert instructions[1].json_args is None
    assert instructions[2].json_args == ("python3", "-m", "http.server")
    assert instructions[1].where == "RUN at ctx/Dockerfile:5"


def test_escape_directive_and_invalid_json_falls_back_to_shell_form() -> None:
    instructions = parse_dockerfile("# escape=`\nFROM x\nRUN echo a `\n  b\nRUN [not json\n")
    assert instructions[1].args == "echo a   b"
    assert instructions[2].json_args is None and instructions[2].args == "[not json"


def test_flags_are_parsed() -> None:
    (_, copy) = parse_dockerfile("FROM x\nCOPY --chown=app:app --chmod=0755 --link a b\n")
    assert copy.flag("chown") == "app:app" and copy.flag("chmod") == "0755"
    assert copy.flag("link") == "" and copy.flag("from") is None
    assert copy.args == "a b"


@pytest.mark.parametrize(
    ("text", "needle", "line"),
    [
        ("FROM a\nRUN --mount=type=cache,target=/root/.cache pip install x\n", "--mount", 2),
        ("FROM a\n\nRUN <<EOF\necho hi\n", "unterminated heredoc <<EOF", 3),
        ("FROM a\nRUN python3 << 'PY'\nimport sys\nPY\n", "has a space after <<", 2),
        ("FROM a\nONBUILD RUN echo\n", "ONBUILD", 2),
        ("FROM a\nFROBNICATE now\n", "unknown instruction 'FROBNICATE'", 2),
        ("FROM a\nADD git@github.com:x/y.git /x\n", "git repository", 2),
        ("FROM a\nSHELL /bin/bash -c\n", "JSON form", 2),
        ("ENV a=b\nFROM a\n", "only ARG may come before the first FROM", 1),
        ("FROM a\nCOPY --bogus x y\n", "unknown flag --bogus", 2),
    ],
)
def test_refusals_name_instruction_file_and_line(text: str, needle: str, line: int) -> None:
    with pytest.raises(DockerfileError) as caught:
        parse_dockerfile(text, "task/Dockerfile")
    message = str(caught.value)
    assert needle in message
    assert f"task/Dockerfile:{line}" in message
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ImageError)


def test_platform_and_escape_directive() -> None:
    instructions = parse_dockerfile("ARG P=linux/s390x\nFROM --platform=$P debian:bookworm\n")
    with pytest.raises(DockerfileError, match=r"FROM at Dockerfile:2: --platform=linux/s390x"):
        base_image(instructions)
    assert base_image(parse_dockerfile("FROM --platform=$TARGETPLATFORM a\n"))[0] == "a"
    built = plan("# escape=`\nFROM x\nENV A=`$literal B=$HOSTNAME\n", env={"HOSTNAME": "h"})
    assert built.config.env == {"HOSTNAME": "h", "A": "$literal", "B": "h"}


def test_every_problem_is_reported_with_its_line() -> None:
    text = (
        "FROM a\nRUN python3 << 'PY'\nimport sys\nprint(sys.argv)\nPY\n"
        "FROBNICATE now\nRUN --mount=type=cache,target=/c true\nONBUILD RUN x\n"
    )
    with pytest.raises(DockerfileError) as caught:
        parse_dockerfile(text, "t/Dockerfile")
    problems = caught.value.problems
    assert [p.split(": ")[0] for p in problems] == [
        "RUN at t/Dockerfile:2",
        "unknown instruction 'FROBNICATE' at t/Dockerfile:6; Docker's builder knows FROM, RUN, "
        "COPY, ADD, WORKDIR, ENV, USER, ARG, LABEL, EXPOSE, CMD, ENTRYPOINT, VOLUME, STOPSIGNAL, "
        "HEALTHCHECK, SHELL, MAINTAINER (and ONBUILD)",
        "RUN at t/Dockerfile:7",
        "ONBUILD at t/Dockerfile:8",
    ]
    assert "line 3 ('import sys')" in problems[0] and "write <<'PY'" in problems[0]
    assert str(caught.value).startswith("4 problems in t/Dockerfile:")


def test_heredocs_in_every_form() -> None:
    text = (
        "FROM x\nENV G=hey\nRUN <<EOF\necho $G\nEOF\n"
        "RUN python3 <<'PY' && cat <<-X > /f\nimport sys\nPY\n\t\tindented $G\n\tX\n"
        "RUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n"
        'COPY <<EOF /etc/x\nv=$G "$G" \\$no\nEOF\n'
        "COPY --chmod=755 <<'A' /bin/\necho $G\nA\nRUN echo done\n"
    )
    instructions = parse_dockerfile(text)
    assert [i.line for i in instructions] == [1, 2, 3, 6, 11, 15, 18, 21]
    steps = plan_build(instructions, ImageConfig()).steps
    run, two, shebang, copy, script, last = steps
    assert isinstance(run, RunStep) and run.argv == ("/bin/sh", "-c", "echo $G\n")
    assert isinstance(two, RunStep) and two.argv[2] == (
        "python3 <<'PY' && cat <<-X > /f\nimport sys\nPY\nindented $G\nX\n"
    )  # the shell reads the heredocs, as BuildKit runs them
    assert isinstance(shebang, RunStep) and shebang.argv[-1] == "#!/usr/bin/env python3\nprint(1)\n"
    assert isinstance(copy, CopyStep) and copy.inline == (("EOF", 'v=hey "hey" $no\n'),)
    assert (copy.sources, copy.dest, copy.extract) == (("EOF",), "/etc/x", False)
    assert isinstance(script, CopyStep) and script.inline == (("A", "echo $G\n"),)  # quoted
    assert script.chmod == 0o755 and script.dest == "/bin/"
    assert isinstance(last, RunStep) and last.argv[2] == "echo done"


def test_stages_args_before_from_and_copy_from() -> None:
    text = (
        "ARG BASE=debian:bookworm\nARG V=1\nFROM ${BASE} AS Build\nARG V\nENV A=$V\n"
        "RUN make\nFROM build AS test\nRUN test\nFROM $BASE\n"
        "COPY --from=build /out /usr/local/bin/\nCOPY --from=0 /x /y\n"
        "ADD --chown=1:2 https://example.com/a.tgz /opt/\n"
    )
    instructions = parse_dockerfile(text)
    found = stages(instructions, {"BASE": "debian:12"})
    assert [(s.index, s.name, s.base) for s in found] == [
        (0, "build", "debian:12"),
        (1, "test", "build"),
        (2, None, "debian:12"),
    ]
    assert plan_build(instructions, ImageConfig(), stage=0).config.env == {"A": "1"}
    final = plan_build(instructions, ImageConfig())
    assert final.base == "debian:bookworm" and final.stage is None
    first, second, add = final.steps
    assert isinstance(first, CopyStep) and first.from_stage == "build"
    assert first.context_sources == () and first.sources == ("/out",)
    assert isinstance(second, CopyStep) and second.from_stage == "0"
    assert isinstance(add, CopyStep) and add.urls == ("https://example.com/a.tgz",)
    assert add.context_sources == () and add.chown == "1:2"


def test_plan_reports_every_problem_of_a_stage() -> None:
    instructions = parse_dockerfile("FROM x\nCOPY onlyone\nRUN true\nCOPY --chmod=u+x a b\n")
    with pytest.raises(DockerfileError) as caught:
        plan_build(instructions, ImageConfig())
    assert [p.split(": ")[0] for p in caught.value.problems] == [
        "COPY at Dockerfile:2",
        "COPY at Dockerfile:4",
    ]


def test_shift_operators_are_not_heredocs() -> None:
    (_, run) = parse_dockerfile('FROM x\nRUN python3 -c "print(1<<x)" && echo $((1<<4))\n')
    assert run.args.endswith("$((1<<4))")


def test_no_from_is_refused() -> None:
    with pytest.raises(DockerfileError, match="no FROM"):
        parse_dockerfile("RUN true\n")


# --- substitution --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$A/x", "1/x"),
        ("${A}x", "1x"),
        ("${UNSET:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${EMPTY-fallback}", ""),
        ("${A:+set}", "set"),
        ("${UNSET:+set}", ""),
        ("${UNSET:-${A}-nested}", "1-nested"),
        ("'$A'", "$A"),
        ('"$A b"', "1 b"),
        ("\\$A", "$A"),
        ("$UNSET.", "."),
        ("cost $", "cost $"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, {"A": "1", "EMPTY": ""}) == expected


def test_expand_words_keeps_quoted_spaces() -> None:
    assert expand_words('a "b c" ${X}d', {"X": "x"}) == ["a", "b c", "xd"]


def test_bad_substitution_names_the_line() -> None:
    with pytest.raises(DockerfileError, match=r"WORKDIR at Dockerfile:2: .*\$\{A/x"):
        plan("FROM x\nWORKDIR ${A/x/y}\n")
    with pytest.raises(DockerfileError, match="A: needed"):
        plan("FROM x\nUSER ${A:?needed}\n")


# --- planning ------------------------------------------------------------------------


def test_args_before_and_after_from_with_build_args() -> None:
    text = (
        "ARG TAG=bookworm\nARG OTHER\nFROM debian:${TAG} AS base\n"
        "ARG TAG\nARG V=1\nRUN echo $TAG $V\n"
    )
    instructions = parse_dockerfile(text)
    assert base_image(instructions)[:2] == ("debian:bookworm", "base")
    assert base_image(instructions, {"TAG": "12"})[0] == "debian:12"
    built = plan_build(instructions, ImageConfig(), {"V": "2"})
    (run,) = built.steps
    assert isinstance(run, RunStep)
    assert run.env == {"TAG": "bookworm", "V": "2"}
    assert run.argv == ("/bin/sh", "-c", "echo $TAG $V")  # the shell substitutes in RUN
    assert "TAG" not in built.config.env  # ARGs are not kept in the image


def test_env_forms_workdir_user_shell_and_metadata() -> None:
    built = plan(
        'FROM x\nARG HOME=/arg\nENV A=1 B="two words" C=$A\nENV LEGACY value with spaces\n'
        "ENV PATH=/opt/bin:$PATH HOME=/env\nWORKDIR app\nWORKDIR sub/../lib\nUSER ${A}000\n"
        'SHELL ["/bin/bash", "-euc"]\nRUN echo $HOME\nRUN ["echo", "$HOME"]\nEXPOSE 80/tcp 443\n'
        "LABEL org.x=y\nCMD python3 app.py\nSTOPSIGNAL SIGTERM\n",
        env={"PATH": "/usr/bin"},
    )
    env = built.config.env
    assert env["A"] == "1" and env["B"] == "two words" and env["C"] == ""  # C sees the old A
    assert env["LEGACY"] == "value with spaces"
    assert env["PATH"] == "/opt/bin:/usr/bin" and env["HOME"] == "/env"
    assert built.config.workdir == "/app/lib" and built.config.user == "1000"
    workdirs = [s.path for s in built.steps if isinstance(s, WorkdirStep)]
    assert workdirs == ["/app", "/app/lib"]
    runs = [s for s in built.steps if isinstance(s, RunStep)]
    assert runs[0].argv == ("/bin/bash", "-euc", "echo $HOME")
    assert runs[0].env["HOME"] == "/env"  # ENV wins over ARG
    assert runs[1].argv == ("echo", "$HOME") and runs[1].user == "1000"
    assert runs[1].workdir == "/app/lib"
    labels = built.labels
    assert labels["org.x"] == "y" and labels["rllm.dockerfile.expose"] == "80/tcp 443"
    assert labels["rllm.dockerfile.cmd"] == '["/bin/bash", "-euc", "python3 app.py"]'
    assert labels["rllm.dockerfile.stopsignal"] == "SIGTERM"


def test_copy_destinations_and_flags() -> None:
    built = plan(
        "FROM x\nARG OWNER=app\nWORKDIR /srv\nCOPY --chown=${OWNER}:staff --chmod=750 a b ./\n"
        'COPY ["c d", "dest"]\nADD x.tar.gz /opt/\n'
    )
    copies = [s for s in built.steps if isinstance(s, CopyStep)]
    assert (copies[0].sources, copies[0].dest) == (("a", "b"), "/srv/")
    assert copies[0].chown == "app:staff" and copies[0].chmod == 0o750
    assert (copies[1].sources, copies[1].dest, copies[1].extract) == (("c d",), "/srv/dest", False)
    assert copies[2].extract and copies[2].dest == "/opt/"
    with pytest.raises(DockerfileError, match=r"COPY at Dockerfile:2: --chmod=u\+x"):
        plan("FROM x\nCOPY --chmod=u+x a b\n")
    with pytest.raises(DockerfileError, match="COPY at Dockerfile:2: COPY needs a source"):
        plan("FROM x\nCOPY onlyone\n")


# --- FROM resolution -----------------------------------------------------------------


async def test_unknown_from_says_how_to_import(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    (context := tmp_path / "ctx").mkdir()
    (context / "Dockerfile").write_text("# hi\nFROM ghcr.io/acme/tool:1.2\nRUN true\n")
    with pytest.raises(ImageError) as caught:
        await build_image(None, store, context)  # type: ignore[arg-type]  # refused before any backend is used
    message = str(caught.value)
    assert "ghcr.io/acme/tool:1.2" in message and "Dockerfile:2" in message
    assert "rllm-cli sandbox image import ghcr.io/acme/tool:1.2 rootfs.tar" in message


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("python:3.99-slim", "asked for 3.99"),  # pyenv has no 3.99
        ("ubuntu:22.04", "debootstrap"),
        ("python:3.11-alpine", "not Debian"),
    ],
)
async def test_refused_from_gives_a_hint(tmp_path: Path, name: str, needle: str) -> None:
    (instruction,) = parse_dockerfile(f"FROM {name}\n")
    with pytest.raises(ImageError, match=needle):
        await resolve_from(None, ImageStore(tmp_path), name, instruction)  # type: ignore[arg-type]  # refused before any backend is used


def test_derived_names() -> None:
    assert normalize_name("docker.io/library/python:3.11-slim") == "python:3.11-slim"
    assert normalize_name("debian") == "debian:latest"
    recipe = derived_recipe("python:3.11-slim")
    assert recipe is not None and "python3-venv" in recipe
    assert derived_recipe("python:3.11.9-slim-bookworm") == recipe
    assert derived_recipe("python:3-slim") == recipe
    assert derived_recipe("python:3.12") is None


# --- build context -------------------------------------------------------------------


def test_dockerignore_globs_and_exceptions(tmp_path: Path) -> None:
    for rel in (
        "a.py",
        ".hidden",
        "docs/x.md",
        "docs/keep.md",
        "build/out/o.bin",
        "src/m/__pycache__/c.pyc",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / ".dockerignore").write_text("# c\n/build\ndocs\n!docs/keep.md\n**/__pycache__\n")
    context = BuildContext(tmp_path)
    assert context.ignored("build/out/o.bin") and context.ignored("docs/x.md")
    assert not context.ignored("docs/keep.md") and context.ignored("src/m/__pycache__/c.pyc")
    assert context.match("*", "COPY") == [".dockerignore", ".hidden", "a.py", "src"]
    assert [inner for inner, _, _ in context.walk("src")] == ["m"]
    assert [inner for inner, _, _ in context.walk("docs")] == ["keep.md"]
    with pytest.raises(DockerfileError, match="outside the build context"):
        context.match("../etc/passwd", "COPY at Dockerfile:3")
    with pytest.raises(DockerfileError, match=r"COPY at Dockerfile:3: source 'nope\*'"):
        context.match("nope*", "COPY at Dockerfile:3")
    before = context.digest(["a.py"], "COPY")
    (tmp_path / "a.py").chmod(0o755)
    assert context.digest(["a.py"], "COPY") != before


# --- layers --------------------------------------------------------------------------


def _base_layer(root: Path) -> Path:
    base = root / "base"
    (base / "usr/bin").mkdir(parents=True)
    (base / "etc").mkdir()
    (base / "bin").symlink_to("usr/bin")
    (base / "etc/passwd").write_text(
        "root:x:0:0::/root:/bin/sh\napp:x:1001:1001::/home/app:/bin/sh\n"
    )
    (base / "etc/group").write_text("root:x:0:\nstaff:x:50:\n")
    (base / "tmp").mkdir(mode=0o1777)
    (base / "tmp").chmod(0o1777)
    (base / "gone").write_text("x")
    return base


@root_only
def test_layer_view_whiteouts_and_symlinks(tmp_path: Path) -> None:
    base = _base_layer(tmp_path)
    upper = tmp_path / "upper"
    upper.mkdir()
    os.mknod(upper / "gone", stat.S_IFCHR | 0o000, os.makedev(0, 0))  # a whiteout
    view = LayerView([base, upper])
    assert view.lstat("/gone") is None and view.lstat("/etc/passwd") is not None
    assert view.resolve("/bin/sh") == "/usr/bin/sh"
    assert view.resolve("/bin", follow_last=False) == "/bin"
    assert owner("app:staff", view, "COPY") == (1001, 50) and owner("7", view, "COPY") == (7, 7)
    with pytest.raises(DockerfileError, match="no user 'nobody'"):
        owner("nobody", view, "COPY at Dockerfile:4")


@root_only
def test_copy_writes_through_image_symlinks_with_owner_and_mode(tmp_path: Path) -> None:
    base = _base_layer(tmp_path)
    (context := tmp_path / "ctx").mkdir()
    (context / "tool").write_text("#!/bin/sh\n")
    (context / "pkg/sub").mkdir(parents=True)
    (context / "pkg/sub/f.txt").write_text("f")
    (context / "pkg/link").symlink_to("sub/f.txt")
    layer = tmp_path / "layer"
    layer.mkdir()
    writer = LayerWriter(layer, [base])
    (_, copy, copy_dir) = parse_dockerfile(
        "FROM x\nCOPY --chown=app --chmod=755 tool /bin/\nCOPY pkg /tmp/pkg\n"
    )
    steps = plan_build([*parse_dockerfile("FROM x\n"), copy, copy_dir], ImageConfig()).steps
    context_files = BuildContext(context)
    for step in steps:
        assert isinstance(step, CopyStep)
        apply_copy(step, context_files, writer)
    tool = layer / "usr/bin/tool"
    assert tool.is_file() and not (layer / "bin").exists()  # the /bin symlink is kept
    assert (tool.stat().st_uid, tool.stat().st_gid, stat.S_IMODE(tool.stat().st_mode)) == (
        1001,
        1001,
        0o755,
    )
    assert stat.S_IMODE((layer / "tmp").stat().st_mode) == 0o1777  # parent copied from the image
    assert (layer / "tmp/pkg/sub/f.txt").read_text() == "f"
    assert os.readlink(layer / "tmp/pkg/link") == "sub/f.txt"
    with pytest.raises(DockerfileError, match="ending in '/'"):
        (_, bad) = parse_dockerfile("FROM x\nCOPY tool pkg /dest\n")
        (step,) = plan_build([*parse_dockerfile("FROM x\n"), bad], ImageConfig()).steps
        assert isinstance(step, CopyStep)
        apply_copy(step, context_files, writer)


def _tar(members: list[tuple[str, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size, info.uid, info.gid, info.mode = len(data), 1234, 99, 0o640
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@root_only
@pytest.mark.parametrize("bad", ["../escape", "/etc/absolute", "ok/../../escape"])
def test_import_refuses_members_outside_the_root(tmp_path: Path, bad: str) -> None:
    (tarball := tmp_path / "rootfs.tar").write_bytes(_tar([("etc", None), (bad, b"x")]))
    store = ImageStore(tmp_path / "images")
    with pytest.raises(ImageError, match="refused"):
        import_rootfs(store, "bad:1", tarball)
    assert store.find("bad:1") is None
    assert [p.name for p in store.layers_dir.iterdir()] == []  # nothing left behind


@root_only
def test_import_keeps_owners_and_is_stored_once(tmp_path: Path) -> None:
    (tarball := tmp_path / "rootfs.tar").write_bytes(
        _tar([("./etc/", None), ("./etc/hostname", b"box\n")])
    )
    store = ImageStore(tmp_path / "images")
    first = import_rootfs(store, "mine:1", tarball)
    second = import_rootfs(store, "mine:2", tarball)
    assert first.layers == second.layers
    hostname = first.layers[0] / "etc/hostname"
    assert hostname.read_text() == "box\n"
    st = hostname.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 99, 0o640)


@root_only
def test_add_extracts_a_local_tar_and_copies_other_files(tmp_path: Path) -> None:
    base = _base_layer(tmp_path)
    (context := tmp_path / "ctx").mkdir()
    (context / "bundle.tar").write_bytes(_tar([("pkg/", None), ("pkg/data.txt", b"42")]))
    (context / "plain.txt").write_text("plain")
    (layer := tmp_path / "layer").mkdir()
    instructions = parse_dockerfile("FROM x\nADD bundle.tar /opt/\nADD plain.txt /opt/\n")
    for step in plan_build(instructions, ImageConfig()).steps:
        assert isinstance(step, CopyStep)
        apply_copy(step, BuildContext(context), LayerWriter(layer, [base]))
    data = layer / "opt/pkg/data.txt"
    assert data.read_text() == "42" and data.stat().st_uid == 1234  # the archive's owner
    assert (layer / "opt/plain.txt").read_text() == "plain"
    assert not (layer / "opt/bundle.tar").exists()


def test_the_projects_own_dockerfile_plans() -> None:
    text = (ROOT / "Dockerfile").read_text()
    built = plan_build(parse_dockerfile(text), ImageConfig(env={"PATH": "/usr/bin"}))
    assert base_image(parse_dockerfile(text))[0] == "python:3.11-slim"
    kinds = [type(step).__name__ for step in built.steps]
    assert kinds.count("RunStep") == 2 and kinds.count("CopyStep") == 3
    last_run = [s for s in built.steps if isinstance(s, RunStep)][-1]
    assert (
        last_run.env["EXTRAS"] == "gateway,clickhouse,eval,train,tinker,fireworks"
        and last_run.workdir == "/app"
    )
    assert built.config.env["RLLM_HOME"] == "/data" and "EXTRAS" not in built.config.env
    assert built.labels["rllm.dockerfile.entrypoint"] == '["rllm-cli"]'


@root_only
def test_import_never_writes_through_a_symlink_onto_the_host(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        link = tarfile.TarInfo("evil")
        link.type, link.linkname = tarfile.SYMTYPE, str(outside)
        tar.addfile(link)
        up = tarfile.TarInfo("up")
        up.type, up.linkname = tarfile.SYMTYPE, "../../../../.."
        tar.addfile(up)
        for name in ("evil/owned", f"up{tmp_path}/owned2"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    (tarball := tmp_path / "rootfs.tar").write_bytes(buffer.getvalue())
    image = import_rootfs(ImageStore(tmp_path / "images"), "links:1", tarball)
    assert not outside.exists() and not (tmp_path / "owned2").exists()
    layer = image.layers[0]
    assert (layer / str(outside).lstrip("/") / "owned").read_text() == "x"  # inside the image
    assert os.readlink(layer / "evil") == str(outside)
