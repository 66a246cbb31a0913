"""The conformance suite every sandbox provider passes (issue 31, item 3), each check run on
every registered provider: its limits hold (memory, processes, disk, file size, time), it has
no network, its user and privileges are what they should be, files round-trip byte for byte,
exit codes are exact, a SIGKILLed owner's sandbox is removed, labels and the orphan sweep work.

One sandbox per provider serves the checks that leave it running (``box``, root in the base
image, as grading runs); the checks that need another user, another network or a dead owner
make their own. Outside CI a provider whose service is down is skipped, saying why; in CI
(CI=true) it fails, naming the provider.
"""
from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raydist.sandbox import Limits, Sandbox, SandboxUnavailable, base_image_tag, owner_label
from raydist.sandbox.command import KILL_GRACE
from raydist.sandbox.reaper import REAP_BOUND, lock_path
from raydist.sandbox.registry import PROVIDERS, connect
from tests.test_faults_sandbox import wait_for

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
PAGE = 4096
LIMITS = Limits(cpus=1.0, memory="256m", pids=64, file_size="100m", tmp_size="64m", testbed_size="64m")
# CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID (raydist.sandbox.container.CAPABILITIES)
KEPT_CAPS = "00000000000000fb"
NO_CAPS = "0" * 16
SLACK = 3.0  # seconds an exec may take beyond its command on a loaded 2-core machine


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI runs the conformance suite on every provider: launch/setup.sh starts them)")
    pytest.skip(reason)


@pytest.fixture(scope="module", params=[pytest.param(name, marks=getattr(pytest.mark, name))
                                        for name in sorted(PROVIDERS)])
def provider(request):
    """A connected provider whose base image exists, one per registered provider."""
    try:
        connected = connect(request.param)
    except SandboxUnavailable as exc:
        _unavailable(f"sandbox provider {request.param!r} is unavailable: {exc}")
    if not connected.image_exists(base_image_tag()):
        _unavailable(f"sandbox provider {request.param!r} has no base image {base_image_tag()}; "
                     "build it with `bash launch/setup.sh setup`")
    return connected


@pytest.fixture(scope="module")
def box(provider) -> Iterator[Sandbox]:
    """One root sandbox of the base image per provider, for checks that leave it running."""
    with provider.create(base_image_tag(), limits=LIMITS, labels={"raydist.unit": "conformance"},
                         name=f"conformance-{provider.name}") as sandbox:
        yield sandbox


def _exists(provider, name: str) -> bool:
    return bool(provider.client.containers.list(all=True, filters={"name": f"^{name}$"}))


def _status(box: Sandbox, *fields: str) -> dict[str, str]:
    """Fields of ``/proc/self/status`` of a command in ``box``."""
    out = box.exec("cat /proc/self/status", timeout=30, cwd="/").output
    lines = dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)
    return {field: lines[field].strip() for field in fields}


# --- limits ----------------------------------------------------------------------------------

MEMORY_HOG = "python3 -c 'x = [b\"x\" * 10**7 for _ in range(60)]; print(len(x))'"  # 600 MB touched


def test_a_memory_hog_is_oom_killed_and_the_next_command_runs(box):
    hog = box.exec(MEMORY_HOG, timeout=60, cwd="/")
    assert (hog.output, hog.returncode, hog.timed_out, hog.oom_killed) == ("", 137, False, True)
    after = box.exec("echo still here", timeout=30, cwd="/")
    assert (after.output, after.returncode, after.oom_killed) == ("still here\n", 0, False)


# Forks sleeping children until fork fails (or 200 of them), then counts the processes of the
# sandbox: the PID limit counts all of them (init, keep-alive, the exec's wrapper, `timeout`).
FORKS = textwrap.dedent("""\
    import os, time
    kids = 0
    while kids < 200:
        try:
            pid = os.fork()
        except BlockingIOError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids += 1
    print(kids, sum(d.isdigit() for d in os.listdir("/proc")))
""")


def test_forks_stop_at_the_pid_limit_and_the_next_command_runs(box):
    done = box.exec(f"python3 -c '{FORKS}'", timeout=60, cwd="/")
    kids, processes = map(int, done.output.split())
    assert (processes, done.returncode) == (LIMITS.pids, 0)
    assert kids == LIMITS.pids - 5  # init, keep-alive `sleep`, the wrapper's bash, `timeout`, python
    # The children were swept: init, keep-alive, the wrapper, `timeout` and this command's bash.
    count = "n=0; for d in /proc/[0-9]*; do n=$((n+1)); done; echo $n"
    assert box.exec(count, timeout=30, cwd="/").output == "5\n"


@pytest.mark.parametrize("where", ["/tmp", "/testbed"])
def test_filling_a_bounded_volume_answers_enospc_at_its_size(box, where):
    done = box.exec(f"dd if=/dev/zero of={where}/fill bs=4k; stat -c %s {where}/fill; rm {where}/fill",
                    timeout=60, cwd="/")
    assert done.returncode == 0
    assert "dd: error writing '" + where + "/fill': No space left on device" in done.output
    size = int(done.output.split()[-1])
    # /tmp holds tmp_size; /testbed the image's (empty) /testbed archive plus testbed_size.
    assert 64 * MIB - PAGE <= size <= 64 * MIB + 3 * PAGE, size


def test_a_file_beyond_the_file_size_limit_is_refused_with_sigxfsz(box):
    # Anywhere, the image's own layer included (root may write there): at most file_size bytes.
    dd = box.exec("dd if=/dev/zero of=/var/tmp/big bs=1M count=150", timeout=60, cwd="/")
    assert (dd.returncode, dd.timed_out) == (153, False)  # 128 + SIGXFSZ
    allocated = box.exec("fallocate -l 200M /tmp/big", timeout=30, cwd="/")
    assert (allocated.returncode, allocated.timed_out) == (153, False)
    sizes = box.exec("stat -c %s /var/tmp/big /tmp/big; rm /var/tmp/big /tmp/big", timeout=30, cwd="/")
    assert sizes.output == f"{100 * MIB}\n0\n"


def test_a_busy_loop_past_its_timeout_is_killed_at_the_timeout(box):
    done = box.exec("while :; do :; done", timeout=2, cwd="/")
    assert (done.returncode, done.timed_out, done.oom_killed) == (124, True, False)
    assert 2 <= done.seconds < 2 + SLACK, done.seconds
    # One that ignores SIGTERM is killed KILL_GRACE seconds later.
    stubborn = box.exec("trap '' TERM; while :; do :; done", timeout=2, cwd="/")
    assert (stubborn.returncode, stubborn.timed_out) == (137, True)
    assert 2 + KILL_GRACE <= stubborn.seconds < 2 + KILL_GRACE + SLACK, stubborn.seconds
    # Nothing of them is left: beside the init (pid 1, the engine's own) only the keep-alive.
    left = box.exec("ps -e -o pid=,comm= | sort -n", timeout=30, cwd="/").output.split()[3::2]
    assert [c for c in left if c not in ("bash", "timeout", "ps", "sort")] == ["sleep"]


# --- network ---------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """The port of a real service listening on the host's 127.0.0.1."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def _dial(host: str, port: int) -> str:
    return f"python3 -c \"import socket; socket.create_connection(('{host}', {port}), timeout=3); print('connected')\""


def test_no_network_the_hosts_loopback_is_not_reached_and_only_lo_exists(box, listener):
    home = box.exec(_dial("127.0.0.1", listener), timeout=30, cwd="/")
    assert home.returncode == 1
    assert home.output.splitlines()[-1] == "ConnectionRefusedError: [Errno 111] Connection refused"
    out = box.exec(_dial("192.0.2.1", 80), timeout=30, cwd="/")
    assert out.output.splitlines()[-1] == "OSError: [Errno 101] Network is unreachable"
    assert box.exec("ls /sys/class/net", timeout=30, cwd="/").output.split() == ["lo"]


def test_the_network_check_catches_a_sandbox_on_the_hosts_network(provider, listener):
    with provider.create(base_image_tag(), limits=LIMITS, name="host-network", network="host") as leaky:
        reached = leaky.exec(_dial("127.0.0.1", listener), timeout=30, cwd="/")
        assert (reached.output, reached.returncode) == ("connected\n", 0)


# --- user and privileges ---------------------------------------------------------------------


def test_root_as_the_image_says_keeps_only_the_kept_capabilities_and_no_new_privileges(box):
    assert box.exec("id", timeout=30, cwd="/").output == "uid=0(root) gid=0(root) groups=0(root)\n"
    assert box.owner == (0, 0)
    assert _status(box, "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs") == {
        "CapEff": KEPT_CAPS, "CapPrm": KEPT_CAPS, "CapBnd": KEPT_CAPS, "CapAmb": NO_CAPS, "NoNewPrivs": "1"}
    raw = box.exec("python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'",
                   timeout=30, cwd="/")
    assert (raw.returncode, raw.output.splitlines()[-1]) == (1, "PermissionError: [Errno 1] Operation not permitted")


def test_a_non_root_user_has_no_capability_at_all(provider):
    with provider.create(base_image_tag(), limits=LIMITS, name="non-root", user="1000:1000") as user_box:
        # (By number: an engine may or may not add a name for an id the image does not know.)
        assert user_box.exec("id -u; id -g; id -G", timeout=30, cwd="/").output == "1000\n1000\n1000\n"
        assert user_box.owner == (1000, 1000)
        status = _status(user_box, "CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd", "NoNewPrivs")
        bounding = status.pop("CapBnd")
        assert status == {"CapEff": NO_CAPS, "CapPrm": NO_CAPS, "CapInh": NO_CAPS, "CapAmb": NO_CAPS, "NoNewPrivs": "1"}
        # The bounding set may be the kept set (Docker) or empty (Podman): never more.
        assert bounding in (KEPT_CAPS, NO_CAPS)
        # So it cannot become root, nor read what only root may.
        root = user_box.exec("python3 -c 'import os; os.setuid(0)'; cat /etc/shadow", timeout=30, cwd="/")
        assert (root.returncode, root.output.splitlines()[-2:]) == (
            1, ["PermissionError: [Errno 1] Operation not permitted", "cat: /etc/shadow: Permission denied"])


# A setuid-root copy of python on the image's layer (the volumes are nosuid), run by uid 1000.
SETUID = ("cp /usr/bin/python3 /usr/local/bin/rootpy && chmod 4755 /usr/local/bin/rootpy && "
          "stat -c %a:%U /usr/local/bin/rootpy && "
          "setpriv --reuid=1000 --regid=1000 --clear-groups /usr/local/bin/rootpy -c 'import os; print(os.geteuid())'; "
          "rm /usr/local/bin/rootpy")


def test_a_setuid_binary_does_not_raise_its_callers_privileges(box):
    assert box.exec(SETUID, timeout=30, cwd="/").output == "4755:root\n1000\n"


# --- files -----------------------------------------------------------------------------------

FILES = {
    "every byte.bin": bytes(range(256)) * 4,
    "latin-1.txt": "café naïve\n".encode("latin-1") + b"\xff\xfe\x00",
    "crlf.txt": b"one\r\ntwo\r\n\r\nlast\r",
    "deep/er/still.py": "x = 'é'\n",
    "empty": b"",
}


def test_files_round_trip_byte_for_byte_with_their_owner_and_mode(box):
    box.write_files(FILES, root="/tmp/round")
    wanted = {path: content if isinstance(content, bytes) else content.encode() for path, content in FILES.items()}
    assert box.read_files([*FILES, "absent"], root="/tmp/round") == {**wanted, "absent": None}
    # A program in the sandbox reads the same bytes.
    inside = box.exec("sha256sum *.bin *.txt empty deep/er/still.py", timeout=30, cwd="/tmp/round").output
    assert inside == "".join(f"{hashlib.sha256(wanted[path]).hexdigest()}  {path}\n" for path in (
        "every byte.bin", "crlf.txt", "latin-1.txt", "empty", "deep/er/still.py"))
    stat = box.exec("stat -c '%a %u:%g %s %n' 'every byte.bin' empty deep/er/still.py", timeout=30,
                    cwd="/tmp/round").output
    assert stat == "644 0:0 1024 every byte.bin\n644 0:0 0 empty\n644 0:0 9 deep/er/still.py\n"


def test_files_written_for_a_non_root_user_are_its_own(provider):
    with provider.create(base_image_tag(), limits=LIMITS, name="files-user", user="1000:1000") as user_box:
        user_box.write_files({"a/b.txt": b"mine\r\n"}, root="/tmp")
        edit = user_box.exec("echo more >> a/b.txt && stat -c '%a %u:%g %n' a a/b.txt", timeout=30, cwd="/tmp")
        assert (edit.output, edit.returncode) == ("755 1000:1000 a\n644 1000:1000 a/b.txt\n", 0)
        assert user_box.read_files(["a/b.txt"], root="/tmp") == {"a/b.txt": b"mine\r\nmore\n"}


def test_the_tree_and_a_copy_out_keep_bytes_modes_and_a_non_utf8_name(box, tmp_path):
    """``read_tree`` and ``copy_out`` keep bytes and modes, and a file name that is not UTF-8
    arrives as the same bytes. (Owners are the sandbox's to tell: Podman's archive calls every
    file root's, so an owner is checked with ``stat`` inside.)"""
    box.write_files(FILES, root="/tmp/tree")
    made = box.exec("chmod 755 'every byte.bin' && chmod 600 crlf.txt && chown 1000:1000 crlf.txt && "
                    "printf 'bytes of a name not in UTF-8' > $'caf\\xe9' && stat -c %u:%g crlf.txt",
                    timeout=30, cwd="/tmp/tree")
    assert (made.output, made.returncode) == ("1000:1000\n", 0)
    tree = box.read_tree("/tmp/tree")
    assert tree is not None
    with tree, tarfile.open(fileobj=tree, mode="r|") as archive:
        files = {member.name: (member.mode & 0o7777, archive.extractfile(member).read())
                 for member in archive if member.isfile()}
    wanted = {path: content if isinstance(content, bytes) else content.encode() for path, content in FILES.items()}
    modes = {"every byte.bin": 0o755, "crlf.txt": 0o600}
    named = b"bytes of a name not in UTF-8"
    assert files == {**{f"tree/{path}": (modes.get(path, 0o644), data) for path, data in wanted.items()},
                     "tree/caf\udce9": (0o644, named)}
    out = box.copy_out("/tmp/tree", tmp_path / "out")
    copied = {str(p.relative_to(out)): (p.stat().st_mode & 0o7777, p.read_bytes())
              for p in out.rglob("*") if p.is_file()}
    assert copied == {**{path: (modes.get(path, 0o644), data) for path, data in wanted.items()},
                      "caf\udce9": (0o644, named)}
    assert os.listdir(os.fsencode(out)).count(b"caf\xe9") == 1

# --- exec ------------------------------------------------------------------------------------


def test_a_stream_that_ends_before_its_command_still_gets_its_output_and_status(box, monkeypatch):
    """An engine may end an exec's attached stream early and empty (moby/moby#27289; Podman
    too) while the command runs on; its exit code then reads as unknown (Docker) or 0 (Podman)
    until it ends. The command's own output and status must come back all the same."""
    real_start = box.client.api.exec_start

    def ended_early(exec_id, stream=False, **kwargs):
        if not stream:
            return real_start(exec_id, stream=stream, **kwargs)
        # The engine goes on with the attached session (read by no one); the caller's stream ends at once.
        threading.Thread(target=lambda: list(real_start(exec_id, stream=True, **kwargs)), daemon=True).start()
        # As a real stream's end, this one's comes after the command started. (Not "ExitCode is
        # set": Podman says 0 before an exec starts, and the stream then ended before it did.)
        for _ in range(500):
            if box.client.api.exec_inspect(exec_id).get("Running"):
                break
            time.sleep(0.01)
        return iter(())

    monkeypatch.setattr(box.client.api, "exec_start", ended_early)
    result = box.exec("sleep 1; echo LATE; exit 4", timeout=30, cwd="/")
    assert (result.output, result.returncode, result.timed_out) == ("LATE\n", 4, False)
    assert result.seconds >= 1


@pytest.mark.parametrize("code", [0, 1, 2, 255])
def test_exit_codes_and_output_are_exact(box, code):
    done = box.exec(f"echo out; printf 'err\\n' >&2; printf 'no newline'; exit {code}", timeout=30, cwd="/")
    assert (done.output, done.returncode, done.timed_out, done.oom_killed) == (
        "out\nerr\nno newline", code, False, False)


def test_a_command_killed_by_a_signal_exits_128_plus_it_and_is_not_called_out_of_memory(box):
    assert [(d.returncode, d.timed_out, d.oom_killed) for d in (
        box.exec("kill -9 $$", timeout=30, cwd="/"), box.exec("kill -TERM $$", timeout=30, cwd="/"))] == [
        (137, False, False), (143, False, False)]


def test_exec_runs_in_cwd_with_env(box):
    done = box.exec('pwd; echo "$GREETING"', timeout=30, cwd="/tmp", env={"GREETING": "hé"})
    assert (done.output, done.returncode) == ("/tmp\nhé\n", 0)


# --- owners, labels, clean-up ----------------------------------------------------------------

# A process that creates a sandbox on the provider argv[1], says its name, then either waits
# (to be SIGKILLed) or, with argv[2] == "orphan", kills its reaper first and exits: the orphan
# only a sweep removes.
OWNER = textwrap.dedent(f"""
    import os, sys, time
    from raydist.sandbox import Limits, reaper
    from raydist.sandbox.registry import connect
    box = connect(sys.argv[1]).create({base_image_tag()!r}, limits=Limits(memory="256m"), name="owner")
    if sys.argv[2] == "orphan":
        reaper._reaper.kill()
        reaper._reaper.wait()
        reaper.lock_path(reaper.owner_label()).unlink()
    print(box.name, flush=True)
    if sys.argv[2] == "orphan":
        os._exit(0)
    time.sleep(600)
""")


def _owner(provider, mode: str) -> tuple[subprocess.Popen, str]:
    """A process owning a sandbox on ``provider``, and the sandbox's name once it runs."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, provider.name, mode], cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    name = owner.stdout.readline().strip()
    assert name.startswith("raydist-owner-"), f"the owner printed {name!r}"
    return owner, name


@pytest.fixture
def leftovers(provider) -> Iterator[list[str]]:
    """Names of sandboxes a failing check may leave; removed after it."""
    names: list[str] = []
    yield names
    for name in names:
        for container in provider.client.containers.list(all=True, filters={"name": f"^{name}$"}):
            container.remove(force=True, v=True)


def test_a_sigkilled_owners_sandbox_is_removed_within_the_reapers_bound(provider, leftovers):
    owner, name = _owner(provider, "wait")
    leftovers.append(name)
    assert _exists(provider, name)
    owner.kill()  # SIGKILL: no finally, no __exit__; not waited for yet, so a zombie
    gone = wait_for(lambda: not _exists(provider, name), REAP_BOUND)
    owner.wait()
    assert gone, f"{name} outlived its SIGKILLed owner by {REAP_BOUND} s"
    lock = lock_path(f"{socket.gethostname()}:{owner.pid}")
    assert wait_for(lambda: not lock.exists(), REAP_BOUND), f"the reaper left {lock} behind"


def test_labels_carry_the_owner_and_the_given_labels(provider, box):
    labels = provider.client.containers.get(box.name).labels
    assert (labels["raydist.owner"], labels["raydist.unit"]) == (owner_label(), "conformance")
    assert box.name.startswith(f"raydist-conformance-{provider.name}-")
    assert len(box.name) == len(f"raydist-conformance-{provider.name}-") + 8


def test_the_sweep_removes_a_dead_owners_sandbox_and_keeps_a_live_ones(provider, box, leftovers):
    owner, orphan = _owner(provider, "orphan")
    leftovers.append(orphan)
    owner.wait()
    assert _exists(provider, orphan)
    assert provider.sweep_orphans() >= 1
    assert (_exists(provider, orphan), _exists(provider, box.name)) == (False, True)


def test_concurrent_sweeps_remove_every_orphan_and_none_fails(provider, box, leftovers):
    # A rerun's sweep meets the killed launch's reaper removing the same sandboxes: Docker
    # answers the second removal 409 ("already in progress") or 404, and neither is an error.
    # Podman 4.3 answers success to both callers, so there a removal may be counted twice.
    orphans = []
    for _ in range(4):
        owner, orphan = _owner(provider, "orphan")
        leftovers.append(orphan)
        owner.wait()
        orphans.append(orphan)
    counts: list[int] = []
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            counts.append(provider.sweep_orphans())
        except BaseException as exc:  # noqa: BLE001 - the check reports it
            errors.append(exc)

    sweepers = [threading.Thread(target=sweep) for _ in range(6)]
    for sweeper in sweepers:
        sweeper.start()
    for sweeper in sweepers:
        sweeper.join()
    assert errors == []
    if provider.name == "docker":
        assert sum(counts) == len(orphans)
    else:
        assert len(orphans) <= sum(counts) and max(counts) <= len(orphans)
    assert [name for name in orphans if _exists(provider, name)] == []
    assert _exists(provider, box.name)
