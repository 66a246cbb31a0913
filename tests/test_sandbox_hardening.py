"""Hardened sandboxes on the real Docker daemon with a real instance image.

Every hostile command runs through the agent's path (``ViewEnvironment.execute`` on a sandbox
created and prepared as ``raydist.cluster.unit`` does) and must end bounded, be recorded as the
command's outcome, leave the container usable and then removed with its volumes, leave the
host's disk and memory alone, and not disturb a second sandbox running at the same time.
"""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from docker.errors import NotFound

from raydist.agents.environment import ViewEnvironment
from raydist.cluster.workspace import install_view
from raydist.sandbox import Limits, Sandbox, as_provider, ensure_instance_image
from raydist.sandbox.archive import pack_files
from raydist.tasks import load_instances
from raydist.views import RepoFiles, build_view

pytestmark = pytest.mark.docker
CACHE = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
SMALL = Limits(cpus=1.0, memory="256m", pids=64, file_size="100m", tmp_size="64m", testbed_size="64m")
TIMEOUT = 5.0  # seconds per agent command
REDUCED_CAPS = "00000000000000fb"  # CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID
GIB = 1 << 30


@pytest.fixture(scope="module")
def instance():
    return load_instances("builtin")[0]  # inflection, a real PyPI sdist


@pytest.fixture(scope="module")
def image(client, instance):
    return ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id)


@pytest.fixture(scope="module")
def view(instance, image):
    return build_view(instance, RepoFiles(Path(image.repo_dir)), "L0", 0)


def _agent_box(client, image, view, hint: str) -> Sandbox:
    """A sandbox as ``raydist.cluster.unit`` creates one, with the view installed."""
    box = as_provider(client).create(image.tag, limits=SMALL, network="none",
                         labels={"raydist.unit": f"hardening-{hint}"}, name=f"agent-{hint}")
    try:
        install_view(box, view)
    except BaseException:
        box.remove()
        raise
    return box


@pytest.fixture(scope="module")
def agent(client, image, view):
    box = _agent_box(client, image, view, "hardening")
    yield box, ViewEnvironment(box, view, timeout=TIMEOUT)
    box.remove()


@pytest.fixture(scope="module")
def neighbour(client, image, view):
    box = _agent_box(client, image, view, "neighbour")
    yield box
    box.remove()


def _status(box: Sandbox, field: str) -> str:
    out = box.exec(f"grep '^{field}:' /proc/self/status", timeout=30).output
    return out.split(":", 1)[1].strip()


# --- the hardening itself ------------------------------------------------------------------

def test_agent_is_unprivileged_without_capabilities_and_with_no_new_privs(agent):
    box, _ = agent
    assert box.exec("id", timeout=30).output == "uid=1000(agent) gid=1000(agent) groups=1000(agent)\n"
    assert box.owner == (1000, 1000)
    caps = {f: _status(box, f) for f in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd")}
    assert caps == {"CapEff": "0" * 16, "CapPrm": "0" * 16, "CapInh": "0" * 16, "CapAmb": "0" * 16,
                    "CapBnd": REDUCED_CAPS}
    assert _status(box, "NoNewPrivs") == "1"


def test_agent_can_write_only_to_its_bounded_volumes(agent):
    box, _ = agent
    # -xdev: the root file system (the container's unbounded writable layer) and the mount
    # points on it; nothing there but the mount points is writable to the agent.
    found = box.exec("find / -xdev -writable ! -type l 2>/dev/null | sort", timeout=60).output
    assert found.split() == ["/run/raydist", "/testbed", "/tmp"]
    mounts = box.exec("awk '$2 ~ /^(\\/tmp|\\/testbed|\\/run\\/raydist)$/ {print $2, $3}' /proc/mounts | sort",
                      timeout=30).output
    assert mounts == "/run/raydist tmpfs\n/testbed tmpfs\n/tmp tmpfs\n"
    assert box.exec("ulimit -f", timeout=30).output == f"{100 << 20 >> 10}\n"  # KiB blocks
    assert box.exec("touch /opt/venv/x", timeout=30).returncode == 1


def test_agent_edits_testbed_runs_tests_imports_and_uses_git(agent, instance):
    box, env = agent
    edit = env.execute({"command": "sed -i 's/^def humanize/def humanize/' inflection/__init__.py && "
                                   "echo '# touched' >> inflection/__init__.py && tail -1 inflection/__init__.py"})
    assert (edit["returncode"], edit["output"]) == (0, "# touched\n")
    box.write_files({"newpkg/sub/notes.txt": "one\n"})
    appended = env.execute({"command": "echo two >> newpkg/sub/notes.txt && cat newpkg/sub/notes.txt && "
                                       "stat -c %U newpkg newpkg/sub newpkg/sub/notes.txt"})
    assert appended["output"] == "one\ntwo\nagent\nagent\nagent\n"
    tests = env.execute({"command": instance.test_cmd + " | tail -1"}, timeout=120)
    assert tests["returncode"] == 0 and tests["output"].startswith("=") and " passed" in tests["output"]
    imports = env.execute({"command": "python -c 'import inflection, pytest; print(inflection.__file__)'"})
    assert imports["output"] == "/testbed/inflection/__init__.py\n"
    git = env.execute({"command": "git status --porcelain && git -c user.name=a -c user.email=a@b "
                                  "commit -qam wip && git log --format=%s | head -1"})
    assert git["output"] == " M inflection/__init__.py\n?? newpkg/\nwip\n"


# --- hostile commands ----------------------------------------------------------------------

def _host_listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _connect(host: str, port: int) -> str:
    return f"python -c \"import socket; socket.create_connection(('{host}', {port}), timeout=3)\""


LISTENER = _host_listener()  # a real service on the host's loopback, which the agent must not reach
HOSTILE = {
    # name: (command, returncode, timed_out, most seconds, text in the output)
    # The command stays (a busy loop of builtins, nothing that forks) until the bomb has met the
    # PID limit: ended at once, it would be swept before its forks fail on a loaded machine.
    "fork bomb": (":(){ :|:& };:; SECONDS=0; while ((SECONDS < 2)); do true; done", 0, False, 5,
                  "fork: retry: Resource temporarily unavailable"),
    # Out of the command's process group: killed by the sweep after the command. Its stderr goes
    # nowhere, so the output is "launched" alone: its messages would fill the observation and
    # elide its middle. Nothing after the bomb forks (echo is a builtin): a fork there races the
    # bomb for the pid limit, and bash's retries (1 + 2 + 4 s) could outlast the 5 s limit.
    "fork bomb in a session of its own": ("exec 2>/dev/null; setsid bash -c ':(){ :|:& };:'; echo launched",
                                          0, False, 5, "launched\n"),
    "dd 10 GB into /testbed": ("dd if=/dev/zero of=/testbed/big bs=1M count=10240", 1, False, 4,
                               "No space left on device"),
    "fallocate 10 GB in /testbed": ("fallocate -l 10G /testbed/big", 153, False, 4, ""),
    "many 100 MB files in /testbed": ("for i in $(seq 100); do dd if=/dev/zero of=/testbed/f$i bs=1M count=100 "
                                      "2>/dev/null; done; "
                                      "echo avail=$(df -B1 --output=avail /testbed | tail -1 | tr -d ' ')",
                                      0, False, 4, "avail=0\n"),
    "dd 10 GB into /tmp": ("dd if=/dev/zero of=/tmp/big bs=1M count=10240", 1, False, 4,
                           "No space left on device"),
    "fallocate 10 GB in /tmp": ("fallocate -l 10G /tmp/big", 153, False, 4, ""),
    "memory hog of 20 GB": ("python -c 'b = bytearray(20 * 1024**3)'", 137, False, 10, ""),
    "sleep infinity": ("sleep infinity", 124, True, TIMEOUT + 3, ""),
    "connect to the host's 127.0.0.1": (_connect("127.0.0.1", LISTENER.getsockname()[1]), 1, False, 3,
                                        "ConnectionRefusedError: [Errno 111] Connection refused"),
    "connect outside": (_connect("192.0.2.1", 80), 1, False, 3, "OSError: [Errno 101] Network is unreachable"),
}


def _host_state(client) -> tuple[int, int]:
    """Free bytes of Docker's disk and the host's available memory in bytes."""
    disk = shutil.disk_usage(client.info()["DockerRootDir"]).free
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return disk, int(meminfo["MemAvailable"].split()[0]) * 1024


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_command_is_bounded_recorded_and_harmless(case, client, image, view, neighbour):
    command, returncode, timed_out, most_seconds, text = HOSTILE[case]
    disk_before, mem_before = _host_state(client)
    box = _agent_box(client, image, view, "hostile")
    volumes = [m["Name"] for m in client.api.inspect_container(box.container.id)["Mounts"] if m["Type"] == "volume"]
    assert len(volumes) == 3  # /run/raydist, /tmp, /testbed
    env = ViewEnvironment(box, view, timeout=TIMEOUT)
    beside: list = []
    try:
        worker = threading.Thread(target=lambda: beside.append(env.execute({"command": command})))
        worker.start()
        time.sleep(0.5)
        other = neighbour.exec("python -c 'print(sum(range(10**6)))'", timeout=30)
        worker.join(60)
        assert not worker.is_alive()
        (out,) = beside
        record = env.steps[-1]
        assert (record["returncode"], record["timed_out"], out["returncode"]) == (returncode, timed_out, returncode)
        assert record["seconds"] < most_seconds
        assert text in out["output"]
        # The neighbour worked meanwhile.
        assert (other.output, other.returncode) == ("499999500000\n", 0)
        assert other.seconds < 10
        # The container lives on: only the offending processes died, and nothing of them is left.
        box.container.reload()
        assert box.container.status == "running"
        alive = env.execute({"command": "echo alive; ps -e -o comm= | sort"})
        assert alive["returncode"] == 0
        assert [c for c in alive["output"].split() if c not in ("bash", "timeout", "ps", "sort")] == [
            "alive", "docker-init", "sleep"]
        stats = box.container.stats(stream=False)["memory_stats"]
        assert stats["max_usage"] <= 256 << 20 == stats["limit"]
    finally:
        box.remove()
    assert client.containers.list(all=True, filters={"name": box.name}) == []
    for name in volumes:
        with pytest.raises(NotFound):
            client.volumes.get(name)
    disk_after, mem_after = _host_state(client)
    # Loose by design (others use this host); an unbounded case would cost 10-20 GB.
    assert disk_before - disk_after < GIB
    assert mem_before - mem_after < GIB


def test_fork_bomb_waited_for_is_killed_at_the_timeout(client, image, view):
    with _agent_box(client, image, view, "bomb-wait") as box:
        env = ViewEnvironment(box, view, timeout=TIMEOUT)
        out = env.execute({"command": "bomb() { bomb | bomb & }; bomb; sleep infinity"})
        record = env.steps[-1]
        assert (record["returncode"], record["timed_out"]) == (124, True)
        assert TIMEOUT <= record["seconds"] < TIMEOUT + 5
        assert out["exception_info"] == f"the command was killed after {TIMEOUT:g} s"
        assert box.exec("ps -e -o comm= | grep -cv '^\\(bash\\|timeout\\|ps\\|grep\\)$'", timeout=30).output == "2\n"


# --- pieces ------------------------------------------------------------------------------

def test_limits_refuse_sizes_docker_cannot_read():
    with pytest.raises(ValueError, match=r"sandbox limit tmp_size='lots' is not a positive Docker size"):
        Limits(tmp_size="lots")
    with pytest.raises(ValueError, match=r"cpus=0 and pids=512 must be positive"):
        Limits(cpus=0)
    assert Limits(testbed_size=None).testbed_size is None


def test_pack_files_gives_a_non_root_owner_the_parents_it_creates():
    import io
    import tarfile

    archive = pack_files({"testbed/a/b/c.py": "x", "testbed/top.py": "y"}, owner=(1000, 1000), below="testbed")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        entries = [(m.name, m.isdir(), m.uid, m.gid) for m in tar.getmembers()]
    assert entries == [("testbed/a", True, 1000, 1000), ("testbed/a/b", True, 1000, 1000),
                       ("testbed/a/b/c.py", False, 1000, 1000), ("testbed/top.py", False, 1000, 1000)]
    with tarfile.open(fileobj=io.BytesIO(pack_files({"tmp/x": "z"}, below="tmp"))) as tar:
        assert [(m.name, m.uid) for m in tar.getmembers()] == [("tmp/x", 0)]
