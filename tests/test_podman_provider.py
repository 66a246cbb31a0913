"""The Podman provider (``sandbox.provider=podman``, issue 31 item 2) on the real Podman 4.3.

As root through the API service ``launch/setup.sh`` starts: the hardening and every limit as the
container sees them, the limits enforced, files round-tripping, labels, the orphan sweep and the
reaper after a SIGKILL. Rootless, as an unprivileged user this module creates: a rootless service
on this cgroup v1 host ignores limits (shown with Podman itself), and raydist refuses it.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from raydist.sandbox import Limits, PodmanProvider, SandboxUnavailable, base_image_tag, connect, owner_label
from raydist.sandbox.podman import DEFAULT_SOCKET
from raydist.sandbox.reaper import REAP_BOUND
from tests.conftest import _unavailable
from tests.launches import launch, runs

pytestmark = pytest.mark.podman
REPO = Path(__file__).resolve().parents[1]
ROOTLESS_USER = "raydist-rootless"
# Forks sleeping children until the kernel refuses; prints how many it made and the errno.
FORKER = """import os, time
made = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        made += 1
except OSError as exc:
    print(made, exc.errno)"""
LIMITS = Limits(cpus=0.5, memory="256m", pids=64, file_size="4m", tmp_size="16m", testbed_size="8m")


@pytest.fixture(scope="module")
def podman() -> PodmanProvider:
    """The root Podman service at its default socket, holding the base image."""
    try:
        provider = connect("podman", timeout=5)
    except SandboxUnavailable as exc:
        _unavailable(str(exc))
    assert isinstance(provider, PodmanProvider)
    if not provider.image_exists(base_image_tag()):
        _unavailable(f"base image {base_image_tag()} is not in Podman's store; run `bash launch/setup.sh`")
    return provider


@pytest.fixture(scope="module")
def box(podman):
    with podman.create(base_image_tag(), limits=LIMITS, name="podman-test", labels={"raydist.unit": "u1"}) as sandbox:
        yield sandbox


def _gone(podman, name: str) -> bool:
    # Listed, not inspected: Podman answers 500 to an inspect while the container is being removed.
    return podman.client.containers.list(all=True, filters={"name": name}) == []


def test_the_container_sees_each_limit_and_the_hardening(box):
    probe = box.exec(
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
        " /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us;"
        " ulimit -f; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; ls /sys/class/net;"
        " tr '\\0' ' ' </proc/1/cmdline; echo;"
        " grep -E ' (/tmp|/testbed|/run/raydist) ' /proc/mounts | cut -d' ' -f2-4 | sort",
        timeout=30, cwd="/")
    assert probe.returncode == 0, probe.output
    assert probe.output.splitlines() == [
        str(256 << 20), str(256 << 20), "64", "50000", "100000",  # memory, no swap, pids, cpu 0.5
        "4096",  # RLIMIT_FSIZE 4 MiB in KiB blocks
        "CapEff:\t00000000000000fb", "CapBnd:\t00000000000000fb",  # CHOWN..SETUID, nothing else
        "NoNewPrivs:\t1",
        "lo",  # no network but the container's own loopback
        "/run/podman-init -- sleep infinity ",
        "/run/raydist tmpfs rw,nosuid,nodev,relatime,size=65536k",  # exec logs (LOG_SIZE)
        "/testbed tmpfs rw,nosuid,nodev,relatime,size=8196k",  # the image's /testbed + 8 MiB
        "/tmp tmpfs rw,nosuid,nodev,relatime,size=16384k",
    ]


def test_labels_and_name(box):
    box.container.reload()
    labels = box.container.labels
    assert (labels["raydist.owner"], labels["raydist.unit"]) == (owner_label(), "u1")
    assert box.name.startswith("raydist-podman-test-") and len(box.name) == len("raydist-podman-test-") + 8


def test_the_limits_are_enforced(box):
    hog = box.exec("python3 -c 'x = bytearray(600 << 20)'", timeout=60, cwd="/")
    assert (hog.returncode, hog.oom_killed, hog.timed_out) == (137, True, False)
    full = box.exec("for i in 1 2 3 4 5 6; do head -c 3M /dev/zero > /tmp/f$i || break; done; ls /tmp; rm -f /tmp/f*",
                    timeout=60, cwd="/")  # 3 MiB files, under the 4 MiB file size, fill the 16 MiB /tmp
    assert full.output == "head: error writing 'standard output': No space left on device\nf1\nf2\nf3\nf4\nf5\nf6\n"
    big = box.exec("head -c 5M /dev/zero > /testbed/big; echo $?; stat -c %s /testbed/big; rm -f /testbed/big",
                   timeout=60)
    assert big.output.splitlines()[-2:] == ["153", str(4 << 20)]  # SIGXFSZ at the 4 MiB file size
    forks = box.exec(f"python3 -c '{FORKER}'", timeout=60, cwd="/")
    made, errno = map(int, forks.output.split())
    assert errno == 11 and 50 < made < 64  # EAGAIN within the 64 pids (init, keep-alive, the exec's own)
    slow = box.exec("sleep 100", timeout=2)
    assert (slow.returncode, slow.timed_out) == (124, True)


def test_files_round_trip_with_exact_bytes_and_owner(box):
    files = {"bin/blob": bytes(range(256)), "crlf.txt": b"a\r\nb\r\n", "latin1.txt": "café".encode("latin-1"),
             "text.py": "print('hé')\n"}
    box.write_files(files, root="/testbed")
    back = box.read_files([*files, "missing"], root="/testbed")
    assert back == {**{k: v if isinstance(v, bytes) else v.encode() for k, v in files.items()}, "missing": None}
    owners = box.exec("stat -c '%u:%g %a %n' bin bin/blob crlf.txt", timeout=30)
    assert owners.output.splitlines() == ["0:0 755 bin", "0:0 644 bin/blob", "0:0 644 crlf.txt"]


def test_sweep_removes_a_dead_owners_sandbox_and_keeps_a_live_one(podman):
    script = textwrap.dedent(f"""
        import os
        from raydist.sandbox import connect, reaper
        box = connect("podman").create({base_image_tag()!r}, name="podman-orphan")
        reaper._reaper.kill()
        reaper._reaper.wait()
        reaper.lock_path(reaper.owner_label()).unlink()
        print(box.name, flush=True)
        os._exit(0)
    """)
    orphan = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=REPO).stdout.strip()
    with podman.create(base_image_tag(), name="podman-live") as live:
        assert not _gone(podman, orphan)
        assert podman.sweep_orphans() >= 1
        assert (_gone(podman, orphan), _gone(podman, live.name)) == (True, False)


def test_a_sigkilled_owners_sandbox_is_removed_within_the_bound(podman):
    script = textwrap.dedent(f"""
        from raydist.sandbox import Limits, connect
        with connect("podman").create({base_image_tag()!r}, limits=Limits(memory="256m"), name="podman-owner") as box:
            print(box.name, flush=True)
            box.exec("sleep infinity", timeout=600)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    name = owner.stdout.readline().strip()
    try:
        assert name.startswith("raydist-podman-owner-"), name
        owner.kill()
        deadline = time.monotonic() + REAP_BOUND
        while not _gone(podman, name) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(podman, name), f"{name} outlived its SIGKILLed owner by {REAP_BOUND} s"
    finally:
        owner.wait()
        if not _gone(podman, name):
            podman.client.containers.get(name).remove(force=True, v=True)


@pytest.mark.ray
@pytest.mark.slow
def test_the_main_job_on_podman_resolves_every_instance_with_the_oracle_and_none_with_the_null_agent(podman, tmp_path):
    """The main job's path (images, agent units, grading) on Podman at L0; the other levels are
    measured by hand (README: Sandbox providers)."""
    done = launch(tmp_path, "--multirun", "agent=oracle,null", "levels=[L0]", "sandbox=podman")
    assert done.returncode == 0, done.stderr[-2000:]
    oracle, null = (runs(tmp_path, "builtin", agent, "L0__s0") for agent in ("oracle", "null"))
    assert (len(oracle), len(null)) == (6, 6)
    assert [r["instance_id"] for r in oracle if not r["resolved"]] == []
    assert [r["instance_id"] for r in null if r["resolved"]] == []


def test_connect_names_the_socket_and_the_remedy():
    with pytest.raises(SandboxUnavailable, match=r"^cannot reach Podman's API service at unix:///nonexistent/p.sock "
                       r"\(.*\) for sandbox.provider=podman; start it with `bash launch/setup.sh` \(or `podman "
                       r"system service --time=0 unix:///run/raydist-podman.sock`\), or set sandbox.podman_socket$"):
        connect("podman", "unix:///nonexistent/p.sock", timeout=2)
    assert DEFAULT_SOCKET == "unix:///run/raydist-podman.sock"


def test_raydist_images_lists_podmans_own_store(podman):
    """`raydist images --provider podman` reads Podman's store, not Docker's: the base image is
    there under Podman's name for it, with Podman's id."""
    import json

    base = podman.client.images.get(base_image_tag())
    done = subprocess.run([sys.executable, "-m", "raydist.cli", "images", "--provider", "podman", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    listed = {row["id"]: row["tags"] for row in json.loads(done.stdout)["images"]}
    assert base.id in listed
    assert any(tag.endswith(base_image_tag()) for tag in listed[base.id])


# --- rootless ----------------------------------------------------------------------------------


def _as(user: str, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` run as ``user`` (``setpriv``), and the environment rootless Podman needs."""
    uid = pwd.getpwnam(user).pw_uid
    env = {"HOME": f"/home/{user}", "USER": user, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
           "XDG_RUNTIME_DIR": f"/tmp/podman-run-{uid}"}
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups", *argv], env


def _as_user(user: str, command: str, *, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
    argv, env = _as(user, ["bash", "-c", command])
    return subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True, check=check, timeout=timeout)


@pytest.fixture(scope="module")
def rootless(podman):
    """``(user, socket URL)`` of a rootless Podman API service run by an unprivileged user (made
    here when absent, with its subordinate ids), holding the base image; stopped afterwards,
    with what rootless Podman leaves running as the user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("creating the unprivileged user needs root and setpriv")
    if subprocess.run(["id", ROOTLESS_USER], capture_output=True, check=False).returncode != 0:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", ROOTLESS_USER], check=True)
    uid = pwd.getpwnam(ROOTLESS_USER).pw_uid
    folder = Path(tempfile.mkdtemp(prefix="raydist-rootless-"))  # not under pytest's root-only folder
    os.chown(folder, uid, uid)
    tag = base_image_tag()
    if _as_user(ROOTLESS_USER, f"podman image exists {tag}").returncode != 0:
        archive = folder / "base.tar"
        with archive.open("wb") as out:
            for chunk in podman.client.images.get(tag).save(named=True):
                out.write(chunk)
        _as_user(ROOTLESS_USER, f"podman load -q -i {archive}", check=True, timeout=600)
        archive.unlink()
    sock = folder / "podman.sock"
    argv, env = _as(ROOTLESS_USER, ["podman", "system", "service", "--time=0", f"unix://{sock}"])
    service = subprocess.Popen(argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        yield ROOTLESS_USER, f"unix://{sock}"
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
        # Rootless Podman leaves its pause process and the conmon of past execs running as the user.
        left = subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True, check=False).stdout.split()
        for pid in left:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_rootless_podman_on_cgroup_v1_ignores_a_memory_limit(rootless):
    """Why raydist refuses it: Podman itself runs the container, unbounded, with a warning only."""
    user, _ = rootless
    done = _as_user(user, f"podman run --rm --network none --memory 64m {base_image_tag()} "
                    "python3 -c 'x = bytearray(200 << 20); print(len(x) >> 20)'", timeout=300)
    assert (done.returncode, done.stdout) == (0, "200\n")
    assert "Resource limits are not supported and ignored on cgroups V1 rootless systems" in done.stderr


def test_rootless_podman_runs_a_hardened_container_without_limits(rootless):
    """What works rootless without cgroup delegation: no network, no capabilities, no new
    privileges, a bounded tmpfs, and files through the archive API."""
    _, address = rootless
    client = PodmanProvider.connect(address).client
    container = client.containers.run(base_image_tag(), command=["sleep", "infinity"], detach=True,
                                      network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                                      tmpfs={"/tmp": "size=16m,mode=1777"}, init=True,
                                      labels={"raydist.owner": owner_label()})
    try:
        for _ in range(3):  # Podman, like Docker, can drop a short exec's output
            probe = container.exec_run(["bash", "-c", "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status;"
                                        " ls /sys/class/net; rm -f /tmp/f; head -c 20M /dev/zero > /tmp/f; echo $?"])
            if probe.output:
                break
        assert probe.output.decode().splitlines() == [
            "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "lo",
            "head: error writing 'standard output': No space left on device", "1"]
    finally:
        container.remove(force=True, v=True)


def test_raydist_refuses_rootless_podman_without_cgroup_delegation(rootless):
    _, address = rootless
    provider = PodmanProvider.connect(address)
    reason = (f"sandbox.provider=podman at {address}: rootless Podman on cgroup v1 cannot enforce the memory, pids "
              "and cpu limits (its containers get no memory, pids, cpu controller); run Podman as root, or on a host "
              "with cgroup v2 delegating memory, pids and cpu to the user")
    with pytest.raises(ValueError) as refused:
        provider.check(Limits())
    assert str(refused.value) == reason
    before = {c.id for c in provider.client.containers.list(all=True)}
    with pytest.raises(ValueError) as refused:
        provider.create(base_image_tag(), limits=LIMITS, name="never")
    assert str(refused.value) == reason
    assert {c.id for c in provider.client.containers.list(all=True)} == before


def test_a_launch_on_rootless_podman_without_cgroup_delegation_exits_2_with_one_line(rootless, tmp_path):
    _, address = rootless
    done = launch(tmp_path, "agent=oracle", "levels=[L0]", "sandbox=podman", f"sandbox.podman_socket={address}")
    assert (done.returncode, done.stderr) == (2, (
        f"raydist: error: sandbox.provider=podman at {address}: rootless Podman on cgroup v1 cannot enforce the "
        "memory, pids and cpu limits (its containers get no memory, pids, cpu controller); run Podman as root, or on "
        "a host with cgroup v2 delegating memory, pids and cpu to the user\n"))
