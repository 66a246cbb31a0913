"""Services failing under a running launch, with real parts: the Docker daemon restarted while a
unit's container runs, and the storage failing when the finished run is copied to it.

The daemon restarted is a second ``dockerd`` this module starts on its own socket and data root
(the shared daemon of the machine is never touched); raydist's base image is loaded into it and
the launch is pointed at it with ``sandbox.docker_host``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.sandbox import base_image_tag
from raydist.sandbox.engine import OWNER_LABEL
from tests.launches import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.ray]

#: The smallest launch: one built-in instance, L0, seed 0, the oracle (no model needed).
SMALL = ("agent=oracle", "benchmark.limit=1", "levels=[L0]", "seeds=[0]")
RUN_DIR = Path("builtin") / "oracle" / "gemma3-270m" / "L0__s0"


def _launch_command(out: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "raydist.launch", f"output_root={out}", *overrides]


class Daemon:
    """A second ``dockerd`` on ``<root>/docker.sock`` with its own data and exec roots, flagged as
    ``launch/setup.sh`` starts the machine's (no bridge, no iptables)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = f"unix://{root}/docker.sock"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        """Starts the daemon and waits until it answers; raises AssertionError with its log if not."""
        args = ["dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
                "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "pid"),
                "--bridge=none", "--iptables=false", "--ip-masq=false",
                "--shutdown-timeout=1"]  # stops its containers at once: a quick restart
        if "--ip6tables" in subprocess.run(["dockerd", "--help"], capture_output=True, text=True, check=False).stdout:
            args.append("--ip6tables=false")
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - the daemon's, closed with it
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.root / "dockerd.log").read_text()[-2000:]
            if self.docker("info").returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"dockerd at {self.host} did not answer in {timeout} s")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        """Sends ``sig`` to the daemon and waits for it to exit (SIGKILL after ``timeout``)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def docker(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        """``docker -H <this daemon> ARGS`` (captured)."""
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, check=False, **kwargs)


@pytest.fixture(scope="module")
def second_daemon(client, tmp_path_factory):
    """A second Docker daemon holding raydist's base image; killed and its data removed at the end."""
    if shutil.which("dockerd") is None:
        pytest.skip("dockerd is not on PATH")
    root = Path(f"/tmp/raydist-dockerd-{os.getpid()}")  # short: a socket path has ~100 characters
    root.mkdir()
    daemon = Daemon(root)
    try:
        daemon.start()
        tag = base_image_tag()
        save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
        loaded = daemon.docker("load", stdin=save.stdout)
        save.wait()
        assert loaded.returncode == 0, loaded.stderr.decode()
        yield daemon
    finally:
        if daemon.process is not None and daemon.process.poll() is None:
            daemon.docker("rm", "-f", *daemon.docker("ps", "-aq").stdout.decode().split())
        daemon.stop()
        subprocess.run(["umount", "-R", str(root / "exec")], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def _running(daemon: Daemon, role: str) -> bool:
    """Whether a raydist container of ``role`` runs on ``daemon``: ``build`` (an instance image's
    build) or ``unit`` (any other: the agent's or the grading's)."""
    listed = daemon.docker("ps", "--filter", f"label={OWNER_LABEL}", "--filter", "status=running",
                           "--format", "{{.Names}}").stdout.decode().split()
    return any(name.startswith("raydist-build-") == (role == "build") for name in listed)


def _restart_when_running(daemon: Daemon, role: str, out: Path, *overrides: str) -> subprocess.CompletedProcess:
    """Launches ``SMALL`` on ``daemon`` into ``out``; once a container of ``role`` runs, stops
    the daemon (SIGTERM, as a service manager does) and starts it again. Returns the finished
    launch (text output)."""
    command = _launch_command(out, *SMALL, f"sandbox.docker_host={daemon.host}", *overrides)
    launched = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not _running(daemon, role):
            assert launched.poll() is None, f"the launch ended before a {role} container ran:\n{launched.stderr.read()}"
            assert time.monotonic() < deadline, f"no {role} container ran in 300 s"
            time.sleep(0.05)
        daemon.stop(signal.SIGTERM)  # its containers stop with it (no live-restore)
        daemon.start()
        stdout, stderr = launched.communicate(timeout=600)
    finally:
        if launched.poll() is None:
            launched.kill()
    return subprocess.CompletedProcess(command, launched.returncode, stdout, stderr)


def _rows(out: Path) -> list[tuple]:
    """``(outcome, error_cause, attempts)`` of each row of the launch's runs table ([] without one)."""
    if not (out / RUN_DIR / "runs.parquet").exists():
        return []
    rows = pq.read_table(out / RUN_DIR / "runs.parquet").to_pylist()
    return [(row["outcome"], row["error_cause"], row["attempts"]) for row in rows]


def test_dockerd_restarted_during_the_image_build_fails_the_unit_and_the_same_command_resolves_it(
        second_daemon, tmp_path):
    out = tmp_path / "out"
    done = _restart_when_running(second_daemon, "build", out)
    assert (done.returncode, _rows(out)) == (1, [("infrastructure_error", "docker", 1)]), done.stdout + done.stderr
    again = subprocess.run(_launch_command(out, *SMALL, f"sandbox.docker_host={second_daemon.host}"), cwd=ROOT,
                           capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "1 units planned, 0 finished before, 1 to run" in again.stdout
    assert _rows(out) == [("resolved", None, 1)]
    assert len(list((out / RUN_DIR / "rows").glob("*.parquet"))) == 1


def test_dockerd_restarted_mid_unit_is_an_infrastructure_error_retried_to_one_resolved_row(second_daemon, tmp_path):
    out = tmp_path / "out"
    done = _restart_when_running(second_daemon, "unit", out, "resume.backoff_s=10")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _rows(out) == [("resolved", None, 2)]
    # the first attempt's row, an infrastructure error of Docker, was replaced by the retry's
    assert "docker (attempt 1 of 3); again in 10 s" in done.stdout
    assert len(list((out / RUN_DIR / "rows").glob("*.parquet"))) == 1


@pytest.fixture
def small_storage(tmp_path):
    """A tmpfs of 13 inodes at ``tmp_path/storage``: room for the storage's root, the four folders
    of the run directory's path and the four files a unit copies as it ends (its row, steps,
    trajectory and grading log, each in its folder), and not one more: the copy of the finished
    run at the end of the launch (.hydra/, the tables) finds it full. Unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = tmp_path / "storage"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,nr_inodes=13", "tmpfs", str(root)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    yield root
    subprocess.run(["umount", str(root)], check=False)


def test_a_storage_full_at_the_final_copy_is_one_line_keeps_the_rows_and_the_same_command_finishes_it(
        client, small_storage, tmp_path):
    out = tmp_path / "out"
    command = _launch_command(out, *SMALL, f"storage={small_storage}")
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    run_dir, stored = out / RUN_DIR, small_storage / RUN_DIR
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    assert first.stderr.strip().splitlines()[-1] == (
        f"raydist: error: could not copy {run_dir}/.hydra/config.yaml to storage {stored}/.hydra/config.yaml: "
        f"No space left on device; every file is kept in {run_dir}: free space in storage={small_storage} "
        "(or fix what the error names) and run the same command again to finish the copy")
    assert _rows(out) == [("resolved", None, 1)]
    assert [p.parent.name for p in stored.glob("rows/*.parquet")] == ["rows"]  # copied as the unit ended
    assert not (stored / "runs.parquet").exists()

    subprocess.run(["mount", "-o", "remount,nr_inodes=1000", str(small_storage)], check=True)  # space freed
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "1 units planned, 1 finished before, 0 to run" in again.stdout
    held = pq.read_table(stored / "runs.parquet").to_pylist()
    assert [(row["outcome"], row["attempts"]) for row in held] == [("resolved", 1)]
    for name in ("steps.parquet", "summary.md", ".hydra/config.yaml"):
        assert (stored / name).read_bytes() == (run_dir / name).read_bytes(), name


def _port(api_base: str) -> int:
    return int(api_base.rsplit(":", 1)[1].split("/")[0])


def _squat(port: int, seconds: float = 2) -> socket.socket:
    """A socket listening on ``port`` of loopback (bound as soon as the dead server's is free),
    so that the supervisor's restart must take another port."""
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # keep-alive traces of the dead server
    deadline = time.monotonic() + seconds
    while True:
        try:
            squatter.bind(("127.0.0.1", port))
            break
        except OSError:
            assert time.monotonic() < deadline, f"port {port} stayed taken"
            time.sleep(0.005)
    squatter.listen()
    return squatter


@pytest.mark.llm
def test_the_view_models_calls_follow_its_server_to_a_new_port(ray_local, gemma_entry):
    """The model access of L1 and L4 preparation (``view_model_complete``) on the real embedded
    model: its server is killed between two calls and its port taken; the second call reaches
    the restarted server on its new port."""
    import ray

    from raydist.cluster.prepare import view_model_complete
    from raydist.cluster.serving import serve_model
    from raydist.views import ViewOptions

    ask = [{"role": "user", "content": "Say yes."}]
    # checks 2 s apart leave the test time to take the port before the restart
    entry = gemma_entry | {"num_cpus": 0, "supervisor": {"check_interval_s": 2, "health_timeout_s": 5}}
    with serve_model("gemma3-270m", entry) as endpoint:
        actor = ray.get_actor(endpoint.server_name, namespace=endpoint.server_namespace)
        complete = view_model_complete(endpoint, ViewOptions(request_timeout_base_s=10))
        assert complete(ask, seed=0, max_tokens=4).strip()
        os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
        squatter = _squat(_port(endpoint.api_base))
        try:
            deadline = time.monotonic() + 120
            while ray.get(actor.status.remote())["state"] != "ready" or ray.get(actor.restarts.remote()) != 1:
                assert time.monotonic() < deadline, ray.get(actor.status.remote())
                time.sleep(0.2)
            # the squatter accepts and never answers: a call to the old port would time out
            assert complete(ask, seed=0, max_tokens=4).strip()
        finally:
            squatter.close()
        assert ray.get(actor.restarts.remote()) == 1
        assert complete.endpoint.api_base == ray.get(actor.api_base.remote()) != endpoint.api_base
        assert complete.usage["calls"] == 2
