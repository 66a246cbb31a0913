"""Units spread over several Ray nodes through the real runner (``run_units``), on clusters
built in this process (``ray.cluster_utils.Cluster``, loopback only): every row names the node
that ran it, units ask for the ``sandbox`` resource, a cluster without it is refused at once,
a worker node lost mid-sweep loses no unit and runs none twice, and a unit's files reach the
driver's run directory from a node that cannot write there.

The unit function stands in for ``execute_unit`` (which needs Docker): it sleeps and returns a
finished row, so what is tested is the scheduling, not the sandbox."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from raydist.agents.outcome import save_trajectory
from raydist.cluster.execute import RowSink
from raydist.cluster.outputs import grading_log, grading_log_name, trajectory_name
from raydist.cluster.scheduler import ClusterTooSmall, RayOptions, init_ray, run_units
from raydist.cluster.unit import UnitSettings, execute_unit
from raydist.cluster.unit_key import build_plan
from raydist.outcomes import RetryPolicy
from raydist.results import ResultStore
from raydist.sandbox.settings import SandboxSettings
from raydist.tasks import load_instances

pytestmark = pytest.mark.ray

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/

PAUSE_S = 2.0
"""How long one stand-in unit runs."""
RUNNING = Path(f"/tmp/raydist-test-nodes-{os.getpid()}")
"""Where a stand-in unit marks itself running (the test's nodes share this machine)."""
HOLD_S = 120.0
"""The longest a stand-in unit waits on its node's hold file."""

# Node loss is noticed within a second or two rather than Ray's default half minute.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 300,
                      "health_check_timeout_ms": 300, "health_check_failure_threshold": 3}

SETTINGS = UnitSettings(agent_kind="null", agent_settings={}, view_options={}, cache_dir="/nonexistent",
                        run_dir="/nonexistent", sandbox=SandboxSettings(grading_timeout_s=60))


def sleeping_unit(unit, instance, settings, endpoint, prepared) -> dict:  # noqa: ARG001 - execute_unit's signature
    """A finished (unresolved) row of ``unit`` after ``PAUSE_S`` seconds. While it runs, a file
    ``RUNNING/<node id>.<key>`` holds its process id; while ``RUNNING/hold.<node id>`` exists
    (at most ``HOLD_S``), it does not finish, so a node about to be lost cannot return a row."""
    node = ray.get_runtime_context().get_node_id()
    RUNNING.mkdir(parents=True, exist_ok=True)
    marker = RUNNING / f"{node}.{unit.key}"
    staged = RUNNING / f".{node}.{unit.key}"
    staged.write_text(str(os.getpid()))
    staged.replace(marker)  # whole: the test reads the pid as soon as the name appears
    time.sleep(PAUSE_S)
    held_until = time.monotonic() + HOLD_S
    while (RUNNING / f"hold.{node}").exists() and time.monotonic() < held_until:
        time.sleep(0.05)
    marker.unlink(missing_ok=True)
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash, "resolved": False,
            "outcome": "unresolved", "agent_exit": "submitted", "wall_seconds": PAUSE_S,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds")}


def plan(seeds: int):
    instances = load_instances("builtin")
    units = build_plan(instances, model="-", agent="null", levels=["L0"], seeds=range(seeds), config_hash="c")
    return units, {i.instance_id: i for i in instances}


@pytest.fixture
def cluster():
    """A head node without ``sandbox`` (it only runs the driver), workers added by the test; Ray
    is connected to it for the test and shut down after."""
    if ray.is_initialized():
        ray.shutdown()  # another test's local Ray; ``ray_local`` starts a new one when next used
    built = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                          "_system_config": FAST_HEALTH_CHECKS})
    try:
        yield built
    finally:
        ray.shutdown()
        built.shutdown()
        shutil.rmtree(RUNNING, ignore_errors=True)


def connect(cluster: Cluster, *workers: dict) -> list:
    nodes = [cluster.add_node(**worker) for worker in workers]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return nodes


@pytest.mark.whole_machine
def test_a_worker_node_lost_mid_sweep_loses_no_unit_and_runs_none_twice(cluster, tmp_path):
    kept, lost = connect(cluster, {"num_cpus": 2, "resources": {"sandbox": 2}},
                         {"num_cpus": 2, "resources": {"sandbox": 2}})
    units, instances = plan(seeds=2)  # 6 built-in instances x 2 seeds
    rows: list[dict] = []
    removed = threading.Event()

    def remove_lost_node_mid_unit() -> None:
        # Once both nodes have finished a unit, units on the node to be lost are held (they
        # cannot return a row), and as soon as one runs there, the node goes with every
        # process on it: its raylet and the workers running units. A worker outliving its
        # raylet could still hand its result to the driver, which no lost machine does.
        while not {kept.node_id, lost.node_id} <= {r.get("node") for r in rows}:
            time.sleep(0.05)
        (RUNNING / f"hold.{lost.node_id}").touch()
        while not list(RUNNING.glob(f"{lost.node_id}.*")):
            time.sleep(0.01)
        cluster.remove_node(lost, allow_graceful=False)
        for marker in RUNNING.glob(f"{lost.node_id}.*"):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                os.kill(int(marker.read_text()), signal.SIGKILL)
        removed.set()

    remover = threading.Thread(target=remove_lost_node_mid_unit, daemon=True)
    remover.start()
    store = ResultStore(tmp_path)
    sink = RowSink(store)

    def on_row(row: dict) -> None:
        sink.write(row)
        rows.append(row)

    options = RayOptions(max_concurrency=4, cpus_per_unit=1)
    run_units(units, instances, SETTINGS, None, options, on_row, execute=sleeping_unit,
              retry=RetryPolicy(max_attempts=3, backoff_s=0.2))
    remover.join(timeout=10)
    assert removed.is_set()

    finished = [r for r in rows if r["outcome"] == "unresolved"]
    failed = [r for r in rows if r["outcome"] != "unresolved"]
    # Every unit finished exactly once, in this launch: none lost, none run twice.
    assert sorted(r["key"] for r in finished) == sorted(u.key for u in units)
    assert len(units) == 12
    # The units in flight on the lost node failed as dead Ray tasks, without a node, and ran
    # again (attempt 2) on the node that was left.
    assert failed, "no unit was in flight on the removed node"
    assert {(r["outcome"], r["error_cause"], r.get("node"), r["attempts"]) for r in failed} == {
        ("infrastructure_error", "ray_task_failed", None, 1)}
    retried = {r["key"] for r in failed}
    assert {(r["node"], r["attempts"]) for r in finished if r["key"] in retried} == {(kept.node_id, 2)}
    assert {r["attempts"] for r in finished if r["key"] not in retried} == {1}
    # Units ran on both workers, never on the head; the IP is the loopback address.
    assert {r["node"] for r in finished} == {kept.node_id, lost.node_id}
    assert {r["node_ip"] for r in finished} == {"127.0.0.1"}
    # The run directory holds one row per unit: the finished one, with its node.
    table = store.compile([u.key for u in units]).to_pylist()
    assert sorted((r["key"], r["outcome"]) for r in table) == sorted((u.key, "unresolved") for u in units)
    assert {r["node"] for r in table} == {kept.node_id, lost.node_id}


READ_ONLY = "RAYDIST_TEST_READ_ONLY"
"""Environment variable naming a folder this worker process must not write in (``forbid_writes``)."""


def _refuse_writes(event: str, args: tuple) -> None:
    """Audit hook: ``PermissionError`` for opening a file to write, creating a folder, renaming
    or removing under the folder named by ``READ_ONLY``, as on a node whose disk lacks it."""
    folder = os.environ.get(READ_ONLY)
    if not folder:
        return
    if event == "open" and args[2] is not None and args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        paths = args[:1]
    elif event in ("os.mkdir", "os.remove", "os.rmdir"):
        paths = args[:1]
    elif event == "os.rename":
        paths = args[:2]
    else:
        return
    for path in paths:
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(path))
            if os.path.commonpath([path, folder]) == folder:
                raise PermissionError(f"{path}: this node cannot write into the driver's run directory")


def forbid_writes(folder: str) -> None:
    """From now on this process cannot write under ``folder`` (an audit hook, installed once)."""
    if not getattr(sys, "_raydist_test_guard", False):
        sys.addaudithook(_refuse_writes)
        sys._raydist_test_guard = True
    os.environ[READ_ONLY] = os.path.abspath(folder)


def trajectory_of(unit) -> dict:
    return {"unit": unit.key, "messages": [{"role": "user", "content": f"fix {unit.instance_id}"}]}


def saving_unit(unit, instance, settings, endpoint, prepared) -> dict:
    """``execute_unit`` on a node that cannot write into ``settings.run_dir``, with a run that
    saves a trajectory as the agents do and grades with a log; ``prepared == "fail"``: the run
    raises after saving its trajectory."""
    forbid_writes(settings.run_dir)

    def run(unit, instance, settings, endpoint, prepared, trajectory_path):  # noqa: ARG001
        save_trajectory(trajectory_of(unit), trajectory_path)
        if prepared == "fail":
            raise RuntimeError("the agent's sandbox went away")
        return {"outcome": "unresolved", "agent_exit": "submitted",
                "files": grading_log(unit, f"tests of {unit.instance_id}: 1 failed\n")}

    return execute_unit(unit, instance, settings, endpoint, prepared, run=run)


def test_a_units_files_reach_the_drivers_run_directory_from_a_node_that_cannot_write_there(cluster, tmp_path):
    worker, = connect(cluster, {"num_cpus": 2, "resources": {"sandbox": 2}})
    units, instances = plan(seeds=1)
    units = units[:3]
    run_dir = tmp_path / "run"
    store = ResultStore(run_dir)
    sink = RowSink(store)
    rows: list[dict] = []
    settings = dataclasses.replace(SETTINGS, run_dir=str(run_dir))

    def on_row(row: dict) -> None:
        sink.write(row)
        rows.append(row)

    run_units(units, instances, settings, None, RayOptions(max_concurrency=3, cpus_per_unit=0.5), on_row,
              prepared={units[2].key: "fail"}, execute=saving_unit)

    assert {r["node"] for r in rows} == {worker.node_id}
    assert sorted((r["key"], r["outcome"]) for r in rows) == sorted(
        [(units[0].key, "unresolved"), (units[1].key, "unresolved"), (units[2].key, "bug")])
    for unit in units:
        trajectory = run_dir / "trajectories" / trajectory_name(unit)
        assert trajectory.read_text() == json.dumps(trajectory_of(unit), indent=2)
        assert store.read_row(unit.key)["trajectory"] == str(trajectory)
    for unit in units[:2]:
        assert (run_dir / "grading" / grading_log_name(unit)).read_text() == f"tests of {unit.instance_id}: 1 failed\n"
    assert sorted(p.name for p in (run_dir / "grading").iterdir()) == sorted(grading_log_name(u) for u in units[:2])
    # The guard is real: a task on the worker that writes into the run directory is refused.
    attempt = ray.remote(try_to_write).options(resources={"sandbox": 1}).remote(str(run_dir))
    assert ray.get(attempt).startswith(f"PermissionError: {run_dir}/trajectories")
    assert not (run_dir / "trajectories" / "x.json").exists()


def try_to_write(run_dir: str) -> str:
    forbid_writes(run_dir)
    try:
        save_trajectory({}, f"{run_dir}/trajectories/x.json")
    except PermissionError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "written"


def test_units_ask_for_the_sandbox_resource_and_run_only_on_nodes_that_offer_it(cluster):
    docker_node, _cpu_only = connect(cluster, {"num_cpus": 2, "resources": {"sandbox": 1}}, {"num_cpus": 2})
    units, instances = plan(seeds=1)
    rows: list[dict] = []
    run_units(units[:3], instances, SETTINGS, None, RayOptions(max_concurrency=3, cpus_per_unit=0.5), rows.append,
              execute=sleeping_unit)
    assert sorted(r["key"] for r in rows) == sorted(u.key for u in units[:3])
    assert {r["node"] for r in rows} == {docker_node.node_id}  # one slot: the three ran there, one by one


@pytest.mark.parametrize("options, message", [
    (RayOptions(sandbox_resource="docker_slot"),
     "no node of the Ray cluster has 1 'docker_slot' for one unit (the cluster has 0 in all, over 2 live node(s))"),
    (RayOptions(sandbox_per_unit=4),
     "no node of the Ray cluster has 4 'sandbox' for one unit (the cluster has 2 in all, over 2 live node(s))"),
])
def test_a_cluster_without_the_sandbox_resource_is_refused_before_any_unit_is_submitted(cluster, options, message):
    connect(cluster, {"num_cpus": 2, "resources": {"sandbox": 2}})
    units, instances = plan(seeds=1)
    started = time.monotonic()
    with pytest.raises(ClusterTooSmall) as raised:
        run_units(units, instances, SETTINGS, None, options, lambda row: pytest.fail("a unit ran"),
                  execute=sleeping_unit)
    assert str(raised.value).startswith(message + "; needed per unit: 0.5 CPU, ")
    assert "launch/ray_start.sh worker" in str(raised.value)
    assert time.monotonic() - started < 10


def test_a_local_ray_advertises_one_sandbox_slot_per_cpu():
    from raydist.cluster.scheduler import _local_cpus

    if ray.is_initialized():
        ray.shutdown()
    init_ray(RayOptions())
    try:
        resources = ray.cluster_resources()
        assert (resources["sandbox"], resources["CPU"]) == (_local_cpus(), _local_cpus())
    finally:
        ray.shutdown()


HOLD_CLUSTER = """
import os, signal, sys, time
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"elsewhere": 1},
                                                        "include_dashboard": False})
signal.signal(signal.SIGTERM, lambda *_: (cluster.shutdown(), sys.exit(0)))
print(cluster.address, flush=True)
time.sleep(300)
cluster.shutdown()
"""

LOCAL_LAUNCH = """
import json, ray
from raydist.cluster.scheduler import RayOptions, init_ray
init_ray(RayOptions())
print(json.dumps(ray.cluster_resources()))
"""


def test_a_local_launch_starts_its_own_ray_beside_a_cluster_already_running_on_the_machine():
    """A bare ``ray.init()`` joins a cluster another program runs here (it finds it through
    /tmp/ray), and then fails on the local instance's resources; a launch without
    ``cluster.address`` must start its own."""
    import subprocess

    holder = subprocess.Popen([sys.executable, "-c", HOLD_CLUSTER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip()  # the other cluster's address: it runs
        done = subprocess.run([sys.executable, "-c", LOCAL_LAUNCH], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        resources = json.loads(done.stdout.strip().splitlines()[-1])
        from raydist.cluster.scheduler import _local_cpus

        assert "elsewhere" not in resources
        assert (resources["sandbox"], resources["CPU"]) == (_local_cpus(), _local_cpus())
    finally:
        holder.terminate()
        holder.wait(60)
