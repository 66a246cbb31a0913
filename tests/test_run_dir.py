"""One launch at a time per run directory (a lock), files replaced whole under unique temporary
names, and the bounded in-launch retry of infrastructure errors on a real local Ray."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.agents.settings import AgentSettings
from raydist.cluster.scheduler import RayOptions, run_units
from raydist.cluster.unit import UnitSettings
from raydist.cluster.unit_key import build_plan
from raydist.outcomes import RetryPolicy
from raydist.results import ResultStore, RunDirBusy, run_dir_lock
from raydist.sandbox.settings import SandboxSettings
from raydist.tasks import load_instances
from raydist.views import ViewOptions

ROOT = Path(__file__).resolve().parents[1]


def _holder(run_dir: Path) -> subprocess.Popen:
    """A process that takes the run directory's lock and keeps it until killed."""
    code = textwrap.dedent(f"""
        import sys, time
        from raydist.results import run_dir_lock
        with run_dir_lock({str(run_dir)!r}):
            print("held", flush=True)
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_launch_is_refused_at_once_naming_the_run_dir_and_the_holders_pid(tmp_path):
    proc = _holder(tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(RunDirBusy) as caught:
            with run_dir_lock(tmp_path):
                pass
        assert time.monotonic() - started < 1.0
        assert str(caught.value) == (f"run directory {tmp_path} is in use by another launch (pid {proc.pid}); "
                                     "wait for it to finish, or choose another output_root")
    finally:
        proc.kill()
        proc.wait()
    with run_dir_lock(tmp_path):  # the kernel released the killed holder's lock
        assert (tmp_path / ".launch.lock").read_text() == f"{__import__('os').getpid()}\n"


def test_concurrent_compiles_leave_runs_parquet_readable_and_no_temporary_file(tmp_path):
    """Two processes compile the same run directory over and over while this one reads
    runs.parquet: with one fixed temporary name they would write into each other's file."""
    store = ResultStore(tmp_path)
    units = build_plan(load_instances("builtin"), model="m", agent="null", levels=["L0", "L3"], seeds=[0, 1, 2],
                       config_hash="c")
    for unit in units:
        store.write_row({"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
                         "level": unit.level, "seed": unit.seed, "config_hash": "c", "resolved": False,
                         "outcome": "unresolved", "model_patch": "x" * 20000})
    code = textwrap.dedent(f"""
        from raydist.results import ResultStore
        store = ResultStore({str(tmp_path)!r})
        keys = [p.stem for p in sorted(store.rows_dir.glob("*.parquet"))]
        for _ in range(40):
            store.compile(keys)
    """)
    writers = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    reads = 0
    while any(w.poll() is None for w in writers):
        if (tmp_path / "runs.parquet").exists():
            assert pq.read_table(tmp_path / "runs.parquet").num_rows == len(units)
            reads += 1
    assert [w.returncode for w in writers] == [0, 0], [w.stderr.read()[-2000:] for w in writers]
    assert reads > 0
    assert sorted(p.name for p in tmp_path.rglob("*.tmp")) == []


@pytest.mark.ray
def test_infrastructure_errors_run_again_with_backoff_up_to_the_bound_and_input_errors_once(ray_local, tmp_path):
    instances = load_instances("builtin", limit=2)
    no_tests = replace(instances[1], test_cmd="")
    units = build_plan([instances[0], no_tests], model="-", agent="null", levels=["L0"], seeds=[0], config_hash="c")
    settings = UnitSettings(agent_kind="null", agent_settings=AgentSettings(), view_options=ViewOptions(),
                            cache_dir=str(tmp_path), run_dir=str(tmp_path),
                            sandbox=SandboxSettings(grading_timeout_s=60, docker_host=f"unix://{tmp_path}/no-daemon.sock"))
    options = RayOptions(max_concurrency=2, cpus_per_unit=0.1)
    rows: list[dict] = []
    started = time.monotonic()
    run_units(units, {i.instance_id: i for i in (instances[0], no_tests)}, settings, None, options, rows.append,
              retry=RetryPolicy(max_attempts=3, backoff_s=0.5))
    seen = [(r["instance_id"], r["outcome"], r["error_cause"], r["attempts"]) for r in rows]
    docker_unit, input_unit = instances[0].instance_id, no_tests.instance_id
    assert sorted(seen) == sorted([
        (docker_unit, "infrastructure_error", "docker", 1),
        (docker_unit, "infrastructure_error", "docker", 2),
        (docker_unit, "infrastructure_error", "docker", 3),
        (input_unit, "input_error", "no_test_cmd", 1),
    ])
    assert time.monotonic() - started >= 0.5 + 1.0  # the backoff was waited: 0.5 s, then 1 s


@pytest.mark.docker
@pytest.mark.ray
def test_two_launches_into_one_run_directory_one_runs_the_other_is_refused(tmp_path):
    args = [sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", "agent=null", "benchmark.limit=1",
            "levels=[L0]"]
    lock = tmp_path / "builtin" / "null" / "gemma3-270m" / "L0__s0" / ".launch.lock"
    first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (lock.exists() and lock.read_text().strip()):
        time.sleep(0.2)
    second = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 2
    assert second.stderr.strip() == (f"raydist: error: run directory {lock.parent} is in use by another launch "
                                     f"(pid {first.pid}); wait for it to finish, or choose another output_root")
    [row] = pq.read_table(lock.parent / "runs.parquet").to_pylist()
    assert (row["outcome"], row["agent_exit"], row["attempts"]) == ("unresolved", "submitted", 1)
