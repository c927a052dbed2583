"""Hostile code stays in its box: attacks a model or a stranger's task could run, each of
which must fail with the sandbox still usable, on every backend that runs untrusted code
here (``local`` and ``docker``); the privileges it runs with are Docker's defaults.

The attacks are the ones that broke out before: writing the host's sysctls (the
``core_pattern`` path to host root), mounting, regaining capabilities with ``unshare``,
the kernel keyring, ptrace of a host process, raw devices, host paths read from
``/proc``. Syscalls the image has no tool for go through ``perl`` (minbase has it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rllm.sandboxes import Sandbox, SandboxBackend, SandboxSettings, SandboxSpec
from rllm.sandboxes.local.sandbox import LocalSandbox
from tests.integration.sandboxes.backends import open_backend

DOCKER_CAPS = "00000000a80425fb"
"""Docker's default capability set as ``/proc/PID/status`` prints it."""


@pytest.fixture(params=["local", "docker"])
async def box(
    request: pytest.FixtureRequest, sandbox_settings: SandboxSettings
) -> AsyncIterator[tuple[str, Sandbox]]:
    async with open_backend(request.param, sandbox_settings, request) as backend:
        sandbox = await backend.create(SandboxSpec(image="debian:bookworm"))
        try:
            yield request.param, sandbox
        finally:
            await sandbox.close()


async def _still_usable(sandbox: Sandbox) -> None:
    done = await sandbox.exec("echo alive")
    assert (done.exit_code, done.stdout) == (0, "alive\n")


async def _status(sandbox: Sandbox, user: str | None = None) -> dict[str, str]:
    done = await sandbox.exec("cat /proc/self/status", user=user)
    assert done.exit_code == 0, done.stderr
    return dict(line.split(":\t", 1) for line in done.stdout.splitlines() if ":\t" in line)


async def test_root_has_dockers_capabilities_seccomp_and_no_more(
    box: tuple[str, Sandbox],
) -> None:
    name, sandbox = box
    root = await _status(sandbox)
    assert (root["CapEff"], root["CapPrm"], root["CapBnd"]) == (DOCKER_CAPS,) * 3
    assert root["CapAmb"] == "0000000000000000"
    assert root["Seccomp"] == "2"  # a filter
    if name == "local":  # Docker leaves no_new_privs to --security-opt; we set it
        assert root["NoNewPrivs"] == "1"
    user = await _status(sandbox, user="65534:65534")
    assert (user["CapEff"], user["CapPrm"]) == ("0000000000000000",) * 2
    assert user["CapBnd"] == DOCKER_CAPS and user["Seccomp"] == "2"


async def test_sysctl_writes_fail_and_the_host_keeps_its_values(
    box: tuple[str, Sandbox], tmp_path: Path
) -> None:
    _, sandbox = box
    before = {
        name: Path(f"/proc/sys/{name}").read_text()
        for name in ("kernel/core_pattern", "kernel/core_uses_pid", "net/ipv4/ip_forward")
    }
    hook = tmp_path / "pwned"
    for name, value in (
        ("kernel/core_pattern", f"|/bin/sh -c 'touch {hook}'"),
        ("kernel/core_uses_pid", "1" if before["kernel/core_uses_pid"].strip() == "0" else "0"),
        ("kernel/hostname", "pwned"),
        ("net/ipv4/ip_forward", "1"),
    ):
        done = await sandbox.exec(f"echo '{value}' > /proc/sys/{name}")
        assert done.exit_code != 0, f"writing {name} succeeded"
    done = await sandbox.exec("sh -c 'kill -SEGV $$'; echo crashed")
    assert done.stdout == "crashed\n"
    after = {name: Path(f"/proc/sys/{name}").read_text() for name in before}
    assert after == before and not hook.exists()
    assert (await sandbox.exec("echo c > /proc/sysrq-trigger")).exit_code != 0
    await _still_usable(sandbox)


async def test_mounts_and_unshare_are_refused(box: tuple[str, Sandbox]) -> None:
    _, sandbox = box
    for command in (
        "mount -t proc proc /mnt",
        "mount -t sysfs sysfs /mnt",
        "mount -t tmpfs tmpfs /mnt",
        "mount --bind / /mnt",
        "mount -o remount,rw /sys",
        "unshare -U -r true",
        "unshare -m true",
        "unshare -U -r -m sh -c 'mount -t tmpfs t /mnt'",
    ):
        done = await sandbox.exec(command)
        assert done.exit_code != 0, f"{command!r} succeeded: {done.stdout}"
    assert (await sandbox.exec("touch /sys/pwned")).exit_code != 0
    await _still_usable(sandbox)


def _perl_syscall(number: int, *args: str) -> str:
    """A perl one-liner printing the raw syscall's result and errno (string arguments,
    written ``"..."``, go through variables: perl's syscall may write into them)."""
    names = [f"$a{i}" for i in range(len(args))]
    assign = "".join(f"my {n} = {a}; " for n, a in zip(names, args, strict=True))
    call = ", ".join([str(number), *names])
    return f'perl -e \'{assign}$r = syscall({call}); print $r, " ", $!+0, "\\n"\''


async def test_keyring_and_ptrace_of_the_host_fail(box: tuple[str, Sandbox]) -> None:
    _, sandbox = box
    add_key = await sandbox.exec(_perl_syscall(248, '"user"', '"k"', '"v"', "1", "-2"))
    assert add_key.stdout.split()[0] == "-1" and add_key.stdout.split()[1] == "1"  # EPERM
    keyctl = await sandbox.exec(_perl_syscall(250, "0", "-3", "0"))  # KEYCTL_GET_KEYRING_ID
    assert keyctl.stdout.split()[0] == "-1"
    # PTRACE_ATTACH (16) to this test's own pid: not there (pid namespace) or refused
    ptrace = await sandbox.exec(_perl_syscall(101, "16", str(os.getpid()), "0", "0"))
    result, errno = ptrace.stdout.split()
    assert result == "-1" and errno in ("1", "3"), ptrace.stdout  # EPERM or ESRCH
    await _still_usable(sandbox)


async def test_a_syscall_newer_than_the_profile_is_enosys_so_libc_falls_back(
    box: tuple[str, Sandbox],
) -> None:
    """Docker's runc answers a syscall newer than its profile with ENOSYS (so glibc 2.39+
    falls back from fchmodat2 to fchmodat: ``chmod -R``, tar and dpkg-source on trixie);
    a syscall the profile refuses by name is still EPERM."""
    _, sandbox = box
    await sandbox.exec("touch /tmp/f && chmod 600 /tmp/f")
    fchmodat2 = await sandbox.exec(_perl_syscall(452, "-100", '"/tmp/f"', "0644", "256"))
    assert fchmodat2.stdout.split() == ["-1", "38"], fchmodat2.stdout  # ENOSYS
    assert (await sandbox.exec("stat -c %a /tmp/f")).stdout == "600\n"
    add_key = await sandbox.exec(_perl_syscall(248, '"user"', '"k"', '"v"', "1", "-2"))
    assert add_key.stdout.split() == ["-1", "1"], add_key.stdout  # EPERM, named by Docker
    await _still_usable(sandbox)


async def test_raw_devices_and_masked_proc_files_give_nothing(box: tuple[str, Sandbox]) -> None:
    _, sandbox = box
    devices = await sandbox.exec("ls /dev")
    assert not {"sda", "vda", "mem", "kmem", "port", "kmsg"} & set(devices.stdout.split())
    mknod = await sandbox.exec("mknod /tmp/disk b 253 0 && head -c 1 /tmp/disk")
    assert mknod.exit_code != 0
    for path in ("/proc/keys", "/proc/timer_list", "/proc/sched_debug"):
        done = await sandbox.exec(f"cat {path} 2>/dev/null | wc -c")
        assert done.stdout.strip() == "0", f"{path} is readable"
    firmware = await sandbox.exec("ls -A /sys/firmware | wc -l")
    assert firmware.stdout.strip() == "0"
    net = await sandbox.exec("ls /sys/class/net")  # read-only /sys is there (Harbor reads it)
    assert net.exit_code == 0 and "lo" in net.stdout.split()
    await _still_usable(sandbox)


async def test_local_root_inside_is_an_unprivileged_host_user(
    sandbox_settings: SandboxSettings, request: pytest.FixtureRequest
) -> None:
    async with open_backend("local", sandbox_settings, request) as backend:
        sandbox = await backend.create(SandboxSpec(image="debian:bookworm"))
        try:
            await _assert_unprivileged(backend, sandbox, sandbox_settings)
        finally:
            await sandbox.close()


async def _assert_unprivileged(
    backend: SandboxBackend, sandbox: Sandbox, settings: SandboxSettings
) -> None:
    uid_map = await sandbox.exec("cat /proc/self/uid_map")
    assert uid_map.stdout.split() == ["0", str(settings.id_base), "65536"]
    made = await sandbox.exec("touch /made-by-root && stat -c %u:%g /made-by-root /etc/passwd")
    assert made.stdout.split() == ["0:0", "0:0"]  # owners inside are the image's
    assert isinstance(sandbox, LocalSandbox)
    init_pid = sandbox.init_pid
    host = os.stat(f"/proc/{init_pid}/root/made-by-root")
    assert (host.st_uid, host.st_gid) == (settings.id_base, settings.id_base)
    # the host paths of the stack are nowhere in what the sandbox can read of itself
    seen = await sandbox.exec("cat /proc/self/mountinfo /proc/1/cmdline | tr '\\0' ' '")
    for path in (str(settings.home), "/run/rllm-sandboxes", "upperdir=/var", "upperdir=/root"):
        assert path not in seen.stdout, f"{path} shows in the sandbox"
    # the host's files through /proc/<pid>/root of a host process: it is not there
    secret = settings.home / "host-secret"
    secret.write_text("host only\n")
    peek = await sandbox.exec(f"cat /proc/{os.getpid()}/root{secret} /proc/1/root{secret}")
    assert peek.exit_code != 0 and "host only" not in peek.stdout
