"""The Docker sandbox beyond what every provider must do (tests/test_sandbox_conformance.py):
the exec wrapper's log and trailer, leftover processes, the container's settings, removal."""
from __future__ import annotations

import pytest

from raydist.sandbox import (
    Limits,
    Sandbox,
    SandboxUnavailable,
    as_provider,
    base_image_tag,
    connect,
    owner_label,
)
from raydist.sandbox.command import LOG_SIZE, ExecResult, split_trailer

pytestmark = pytest.mark.docker


@pytest.fixture
def box(client):
    with as_provider(client).create(base_image_tag(), limits=Limits(memory="1g", pids=256),
                        name="test") as sandbox:
        yield sandbox


def test_output_the_attached_stream_dropped_is_read_back_from_the_exec_log(box, monkeypatch):
    """Docker sometimes delivers an empty stream for a short exec (moby/moby#27289); the
    command still ran, and its output is recovered from the log the wrapper wrote."""
    real_start = box.client.api.exec_start

    def dropping(exec_id, stream=False, **kwargs):
        for _ in real_start(exec_id, stream=True, **kwargs):
            pass  # the daemon "loses" every frame
        return iter(())

    monkeypatch.setattr(box.client.api, "exec_start", dropping)
    result = box.exec("echo COMPLETE; echo err >&2; exit 3", timeout=30)
    assert (result.output, result.returncode) == ("COMPLETE\nerr\n", 3)


def test_the_owner_is_read_back_when_the_attached_stream_is_dropped(box, monkeypatch):
    """The user's ids are asked with a short exec too: a dropped stream must not end a unit."""
    real_start = box.client.api.exec_start

    def dropping(exec_id, stream=False, **kwargs):
        for _ in real_start(exec_id, stream=True, **kwargs):
            pass
        return iter(())

    monkeypatch.setattr(box.client.api, "exec_start", dropping)
    assert box.owner == (0, 0)  # the base image runs as root


def test_the_owner_is_asked_again_after_an_empty_answer(box, monkeypatch):
    """An exec seen to end with exit 0 and no output at all under load must not end a unit."""
    real_exec, calls = box.exec, []

    def empty_once(command, **kwargs):
        calls.append(command)
        return ExecResult("", 0, False, 0.01) if len(calls) == 1 else real_exec(command, **kwargs)

    monkeypatch.setattr(box, "exec", empty_once)
    assert box.owner == (0, 0)
    assert calls == ["id -u; id -g", "id -u; id -g"]


def test_an_owner_never_answered_names_the_sandbox_and_the_attempts(box, monkeypatch):
    monkeypatch.setattr(box, "exec", lambda command, **kwargs: ExecResult("", 0, False, 0.01))
    with pytest.raises(RuntimeError, match=rf"^cannot tell the user of sandbox {box.name}: exit 0, output '' "
                                           r"\(3 attempts\)$"):
        _ = box.owner


def test_the_exit_status_comes_from_the_trailer_without_asking_the_daemon(box, monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("exec_inspect called for a stream that ends with its trailer")

    monkeypatch.setattr(box.client.api, "exec_inspect", refused)
    result = box.exec("printf 12; exit 3", timeout=30)
    assert (result.output, result.returncode) == ("12", 3)


def test_split_trailer_reads_the_status_after_the_marker_and_refuses_a_cut_trailer():
    assert split_trailer(b"out 12__m__0.", "__m__") == (b"out 12", 0)
    assert split_trailer(b"__m__ inside__m__137.", "__m__") == (b"__m__ inside", 137)
    assert split_trailer(b"out", "__m__") == (b"out", None)
    assert split_trailer(b"out__m__", "__m__") == (b"out__m__", None)
    assert split_trailer(b"out__m__12", "__m__") == (b"out__m__12", None)  # 124 cut short


def test_output_beyond_the_log_size_is_cut_and_the_next_command_has_the_whole_log_volume(box):
    # 70 MiB of "x": the log keeps LOG_SIZE bytes of it, and `tr` fails to write the rest.
    huge = box.exec("head -c 70M /dev/zero | tr '\\0' x", timeout=60)
    assert (len(huge.output), huge.output.count("x"), huge.returncode) == (LOG_SIZE, LOG_SIZE, 1)
    # The earlier log is gone before the next command writes its own.
    next_one = box.exec("head -c 40M /dev/zero | tr '\\0' y", timeout=60)
    assert (len(next_one.output), next_one.output.count("y"), next_one.returncode) == (40 << 20, 40 << 20, 0)


def test_without_a_log_volume_the_output_goes_straight_to_the_stream(client):
    """A container ``Sandbox.create`` did not make has no log volume: the output is streamed
    only, and still complete."""
    container = client.containers.run(base_image_tag(), ["sleep", "infinity"], detach=True, init=True,
                                      network_mode="none", labels={"raydist.owner": owner_label()})
    with Sandbox(as_provider(client), container) as box:
        result = box.exec("echo out; echo err >&2; exit 3", timeout=30)
        assert (result.output, result.returncode) == ("out\nerr\n", 3)
        assert box.exec("test -e /run/raydist", timeout=30).returncode == 1


def test_exec_decodes_invalid_utf8_with_replacement(box):
    assert box.exec(r"printf 'a\377b'", timeout=30).output == "a\ufffdb"


def test_timeout_kills_fork_loop_and_its_children(box):
    result = box.exec("while true; do sleep 300 & done", timeout=3)
    assert result.timed_out is True
    assert result.seconds < 15
    left = box.exec("ps -e -o comm= | grep -cx sleep", timeout=30).output.split()
    assert left == ["1"]  # only the keep-alive `sleep infinity`


def test_background_processes_do_not_outlive_their_command(box):
    assert box.exec("sleep 300 & echo started", timeout=30).output == "started\n"
    assert box.exec("ps -e -o args= | grep -cx 'sleep 300' || true", timeout=30).output == "0\n"


def test_processes_that_left_the_group_do_not_outlive_their_command(box):
    assert box.exec("setsid sleep 300 & nohup sleep 301 >/dev/null 2>&1 & disown -a; echo started",
                    timeout=30).output == "started\n"
    assert box.exec("ps -e -o args= | grep -c '^sleep 30[01]$' || true", timeout=30).output == "0\n"
    # The keep-alive is spared: the container still runs.
    assert box.exec("ps -o args= -p 1 --ppid 1", timeout=30).output.split("\n")[:2] == [
        "/sbin/docker-init -- sleep infinity", "sleep infinity"]


# A process in a session of its own that writes "late" for 4 s; the command returns once it has
# left the command's process group.
LATE = ("setsid bash -c ': > /tmp/escaped; for i in 1 2 3 4 5 6 7 8; do sleep 0.5; echo late; done' & "
        "until [ -e /tmp/escaped ]; do sleep 0.05; done; echo early")


def test_a_process_that_left_the_group_does_not_write_into_a_later_commands_output(box):
    # Every command writes the same log file; one left behind would write into the next output.
    assert box.exec(LATE, timeout=30).output == "early\n"
    assert box.exec("sleep 3; echo own", timeout=30).output == "own\n"


def test_without_the_sweep_each_command_writes_a_log_of_its_own(box):
    box._keepalive = None  # as when the keep-alive's pid could not be told: nothing is swept
    assert box.exec(LATE, timeout=30).output == "early\n"
    assert box.exec("sleep 3; echo own", timeout=30).output == "own\n"
    assert box.exec("ls /run/raydist | wc -l", timeout=30).output == "1\n"  # earlier logs removed


def test_write_files_refuses_escaping_paths(box):
    with pytest.raises(ValueError, match=r"'\.\./etc/passwd' must be relative to /testbed"):
        box.write_files({"../etc/passwd": "x"})


def test_container_carries_limits_labels_and_no_network(client):
    with as_provider(client).create(base_image_tag(), limits=Limits(cpus=0.5, memory="256m", pids=64),
                        labels={"raydist.unit": "u1"}, name="inspect me") as box:
        box.container.reload()
        host = box.container.attrs["HostConfig"]
        assert (host["NanoCpus"], host["Memory"], host["PidsLimit"]) == (500_000_000, 256 << 20, 64)
        assert host["NetworkMode"] == "none"
        labels = box.container.labels  # also holds the image's own labels
        assert (labels["raydist.owner"], labels["raydist.unit"]) == (owner_label(), "u1")
        assert box.name.startswith("raydist-inspect-me-") and len(box.name) == len("raydist-inspect-me-") + 8


def test_remove_leaves_nothing_and_is_idempotent(client):
    box = as_provider(client).create(base_image_tag(), name="gone")
    name = box.name
    box.remove()
    box.remove()
    assert client.containers.list(all=True, filters={"name": name}) == []


def test_context_manager_removes_on_error(client):
    with pytest.raises(RuntimeError, match="boom"):
        with as_provider(client).create(base_image_tag(), name="err") as box:
            name = box.name
            raise RuntimeError("boom")
    assert client.containers.list(all=True, filters={"name": name}) == []


def test_connect_names_the_address_and_the_remedy():
    with pytest.raises(SandboxUnavailable, match=r"^cannot reach the Docker daemon at "
                       r"unix:///nonexistent/docker.sock .* for sandbox.provider=docker; "
                       r"start it with `bash launch/setup.sh`, or set sandbox.docker_host$"):
        connect("docker", "unix:///nonexistent/docker.sock", timeout=2)
