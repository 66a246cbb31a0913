"""launch/local_cluster.sh end to end: `ray up` of a local-provider config on three hosts made
on this machine (network namespaces with their own sshd), `ray job submit` of an oracle sweep
over the built-in instances with the repository as the job's working directory, `ray down`.

It needs root (network namespaces), iproute2, util-linux's unshare, and sshd or apt-get to
install it; without them it is skipped and says which is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "launch" / "local_cluster.sh"
# Apart from the script's defaults (raydist-lc, 10.213.7), so a cluster someone made by hand
# is not in the way.
NAME = "rdlc-test"
SUBNET = "10.213.9"
WORKER_IPS = {f"{SUBNET}.2", f"{SUBNET}.3"}
# The virtual environment running the tests (not resolved: its python is a symlink).
VENV = str(Path(sys.executable).parent.parent)



def _missing() -> str | None:
    """Why this machine cannot make the hosts, or None."""
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package})"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"network namespaces are unavailable here: `ip netns list` says {probe.stderr.strip()!r}"
    if not Path("/usr/sbin/sshd").exists() and shutil.which("apt-get") is None:
        return "sshd is not installed and apt-get is not there to install openssh-server"
    return None


def _rows(output_root: Path) -> list[dict]:
    return [row for f in sorted(output_root.glob("*/*/*/*/rows/*.parquet")) for row in pq.read_table(f).to_pylist()]


@pytest.fixture
def output_root():
    """A directory every host sees: not under /tmp or /root, which each host has its own of."""
    path = Path(tempfile.mkdtemp(prefix="raydist-lc-test-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _script(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env={**os.environ, **env}, capture_output=True, text=True,
                          check=False, timeout=60)


def test_an_unknown_mode_is_refused_before_anything_is_made():
    done = _script("deploy")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "local_cluster.sh: error: first argument must be one of up, submit, down, all; got 'deploy'\n"


def test_an_output_root_under_tmp_is_refused_because_each_host_has_its_own_tmp():
    done = _script("all", RAYDIST_LC_OUTPUT="/tmp/runs")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "local_cluster.sh: error: '/tmp/runs' is under /tmp or /root, which each host has its own of: use a "
        "directory every host sees (RAYDIST_LC_DIR, RAYDIST_LC_OUTPUT, RAYDIST_VENV)\n")


def test_a_name_too_long_for_an_interface_is_refused():
    done = _script("up", RAYDIST_LC_NAME="raydist-cluster")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ("local_cluster.sh: error: RAYDIST_LC_NAME='raydist-cluster': give 1-10 lowercase letters, "
                           "digits or '-' (interface names are at most 15 characters)\n")


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.ray
def test_ray_up_job_submit_and_ray_down_run_the_oracle_sweep_on_both_workers(client, output_root):
    reason = _missing()
    if reason:
        pytest.skip(reason)
    state = Path("/var/tmp") / NAME
    env = {**os.environ, "RAYDIST_LC_NAME": NAME, "RAYDIST_LC_SUBNET": SUBNET, "RAYDIST_LC_DIR": str(state),
           "RAYDIST_LC_OUTPUT": str(output_root), "RAYDIST_VENV": VENV}
    try:
        done = subprocess.run(["bash", str(SCRIPT), "all"], env=env, capture_output=True, text=True, timeout=1800,
                              check=False)
    finally:
        # `all` takes the cluster down itself, also when a step fails; this is for a timeout.
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, timeout=600, check=False)
    log = done.stdout[-6000:] + done.stderr[-4000:]
    assert done.returncode == 0, log

    rows = _rows(output_root)
    assert len(rows) == 12, log
    assert Counter(row["outcome"] for row in rows) == {"resolved": 12}
    assert Counter(row["level"] for row in rows) == {"L0": 6, "L3": 6}
    # The head has no sandbox slot: every unit ran on a worker, and both workers ran some.
    assert {row["node_ip"] for row in rows} == WORKER_IPS
    assert len({row["node"] for row in rows}) == 2
    assert "local_cluster.sh: nodes: 3 alive" in done.stdout

    # Down left nothing: namespaces, bridge, state.
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert [line for line in namespaces.splitlines() if line.startswith(f"{NAME}-")] == []
    assert subprocess.run(["ip", "link", "show", f"{NAME}-br"], capture_output=True, check=False).returncode != 0
    assert not state.exists()
