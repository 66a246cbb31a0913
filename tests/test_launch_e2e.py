"""The main job end to end: real Hydra, real Ray, real Docker, real repositories and tests.

Each test runs `python -m raydist.launch` in a subprocess, as a user would, and reads the
tables it writes.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pyarrow.parquet as pq
import pytest

from tests.launches import FULL, LEVELS, ROOT, SEEDS, SHARED_VIEW, launch, runs

SHARED = ROOT.parent / "shared" / "data"

pytestmark = [pytest.mark.docker, pytest.mark.ray]


def raydist_containers(keys: set[str] | None = None) -> list:
    """raydist containers whose owning process is gone: what a finished launch must not leave.
    (Containers of other live raydist processes sharing this daemon are not this test's.) With
    ``keys``, only the agent containers of those units (``raydist.unit``), so that another
    launch running beside this test on the same daemon is not counted."""
    left = []
    for c in docker.from_env().containers.list(all=True, sparse=True, filters={"label": "raydist.owner"}):
        labels = c.attrs.get("Labels") or {}
        pid = labels.get("raydist.owner", "").rpartition(":")[2]
        if keys is not None and labels.get("raydist.unit") not in keys:
            continue
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            left.append(c.id)
    return left


#: The summary's action and audit line for L0 of the shared oracle launch: 12 units (6
#: instances x 2 seeds), an edit and a submit each, 34 identity tokens shown and 140 left
#: visible over the 12 statements (L0 hides nothing).
SUMMARY_L0 = "| - | oracle | L0 | 12 | 0.0 | 0.0 | 0.0 | 0.0 | 1.0 | 0.0 | 1.0 | 0.0 | 34 | 0 | 140 |"


# --- the session's shared launch: oracle and null, every level, seeds 0 and 1 ----------------

@pytest.mark.llm
def test_the_oracle_resolves_every_builtin_unit_at_every_level_and_seed(builtin_launch):
    rows = builtin_launch.oracle.rows
    n_instances = len({r["instance_id"] for r in rows})
    assert n_instances >= 6
    assert sorted((r["level"], r["seed"]) for r in rows) == sorted(
        (level, seed) for level in LEVELS for seed in SEEDS for _ in range(n_instances))
    assert [(r["instance_id"], r["level"], r["seed"]) for r in rows if not r["resolved"]] == []
    assert all(r["fail_to_pass_passed"] == r["fail_to_pass_total"] for r in rows)
    assert all(r["memorised_count"] == 0 for r in rows)
    assert "| oracle | L0 |" in builtin_launch.oracle.stdout and "100.0%" in builtin_launch.oracle.stdout


@pytest.mark.llm
def test_the_null_agent_resolves_no_builtin_view_the_oracle_resolved(builtin_launch):
    rows, null_rows = builtin_launch.oracle.rows, builtin_launch.null.rows
    assert sorted((r["instance_id"], r["level"], r["seed"]) for r in null_rows) == sorted(
        (r["instance_id"], r["level"], r["seed"]) for r in rows)
    assert [r["instance_id"] for r in null_rows if r["resolved"]] == []
    assert all(r["model_patch"] == "" and r["error"] is None for r in null_rows)


@pytest.mark.llm
def test_views_with_l2_show_no_identity_token_and_the_others_show_the_statements(builtin_launch):
    rows = builtin_launch.oracle.rows + builtin_launch.null.rows
    assert [r for r in rows
            if "L2" in r["level"] or r["level"] == "full" if r["leak_count"] or r["unmapped_names"]] == []
    assert all(r["leak_count"] > 0 for r in rows if r["level"] in ("L0", "L3", "L4"))


@pytest.mark.llm
def test_l1_takes_one_paraphrase_attempt_and_l4_rewrites_a_function_around_every_gold_patch(builtin_launch):
    rows = builtin_launch.oracle.rows
    assert {r["statement_source"] for r in rows if r["level"] not in ("L1", "full")} == {"canonical"}
    assert {r["statement_attempts"] for r in rows if r["level"] in ("L1", "full")} == {1}
    l4 = [json.loads(r["view_meta"]) for r in rows if r["level"] == "L4"]
    assert len(l4) == len(rows) // len(LEVELS)
    assert all(m["l4_files"] and {f["source"] for f in m["l4_functions"].values()} == {"deterministic"} for m in l4)


@pytest.mark.llm
def test_seeds_give_different_views_so_the_oracles_recovered_patch_carries_l3s_reordering(builtin_launch):
    rows = builtin_launch.oracle.rows
    n_instances = len({r["instance_id"] for r in rows})
    for level in ("L3", "full"):
        patches = {(r["instance_id"], r["model_patch"]) for r in rows if r["level"] == level}
        assert len(patches) > n_instances, level


@pytest.mark.llm
def test_the_shared_launch_leaves_no_container_of_its_units(builtin_launch):
    keys = {r["key"] for r in builtin_launch.oracle.rows + builtin_launch.null.rows}
    assert len(keys) == len(builtin_launch.oracle.rows) * 2
    assert raydist_containers(keys) == []


@pytest.mark.llm
def test_rerunning_the_same_command_resumes_without_repeating_a_unit(builtin_launch, tmp_path):
    null = builtin_launch.null
    first = {r["key"]: r["finished_at"] for r in null.rows}
    res = launch(builtin_launch.output_root, *null.overrides, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    n = len(first)
    assert f"{n} units planned, {n} finished before, 0 to run" in res.stdout
    again = runs(builtin_launch.output_root, "builtin", "null", SHARED_VIEW)
    assert {r["key"]: r["finished_at"] for r in again} == first


@pytest.mark.whole_machine
def test_sigkill_of_the_driver_then_rerun_leaves_one_row_per_unit_and_no_container(tmp_path):
    args = ["agent=oracle", "levels=[L0,L3]", "seeds=[0]", "cluster.max_concurrency=2"]
    cmd = [sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    rows_dir = tmp_path / "builtin" / "oracle" / "gemma3-270m" / "L0_L3__s0" / "rows"
    deadline = time.time() + 900
    while time.time() < deadline and len(list(rows_dir.glob("*.parquet"))) < 2:
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)  # the driver only: Ray and Docker must clean up after it
    proc.wait()
    killed_at = len(list(rows_dir.glob("*.parquet")))
    assert killed_at >= 2
    res = launch(tmp_path, *args)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = runs(tmp_path, "builtin", "oracle", "L0_L3__s0")
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == len({r["instance_id"] for r in rows}) * 2 == 12
    assert all(r["resolved"] for r in rows)
    assert raydist_containers() == []


@pytest.mark.llm
def test_oracle_run_writes_its_steps_action_counts_and_leak_audit(builtin_launch):
    oracle = builtin_launch.oracle
    [row] = [r for r in oracle.rows if (r["instance_id"], r["level"], r["seed"]) == (
        "jpvanhal__inflection-humanize-id-anchor", "L0", 0)]
    assert (row["actions_edit"], row["actions_submit"], row["actions_read"]) == (1, 1, 0)
    # L0 is the audit's baseline: the statement names three of inflection's 14 identity tokens.
    assert (row["leak_count"], row["leaked_names"], row["unmapped_names"], row["memorised_count"]) == (
        3, '["humanize", "inflection", "titleize"]', 14, 0)
    steps = pq.read_table(oracle.run_dir / "steps.parquet").to_pylist()
    assert [(s["key"], s["step"], s["category"], s["input_tokens"], s["leak_count"], s["memorised_names"])
            for s in steps if s["key"] == row["key"]] == [(row["key"], 1, "edit", 0, 0, "[]"),
                                                           (row["key"], 2, "submit", 0, 0, "[]")]
    assert len(steps) == 2 * len(oracle.rows)  # an edit and a submit per unit
    assert SUMMARY_L0 in oracle.stdout
    l0 = [r for r in oracle.rows if r["level"] == "L0"]
    assert (sum(r["leak_count"] for r in l0), sum(r["unmapped_names"] for r in l0)) == (34, 140)
    # Its trajectory and grading log are in the run directory, written once by the driver.
    trajectories = sorted((oracle.run_dir / "trajectories").iterdir())
    assert len(trajectories) == len(oracle.rows)
    trajectory = Path(row["trajectory"])
    assert trajectory in trajectories
    assert json.loads(trajectory.read_text())["info"]["exit_status"] == "Submitted"
    log = oracle.run_dir / "grading" / trajectory.name.replace(".traj.json", ".grading.log")
    assert "passed" in log.read_text()
    # pandas, polars and duckdb read the run's tables as they are (tests/test_run_tables_readers.py)
    from test_run_tables_readers import assert_read_alike

    assert sorted(r["key"] for r in assert_read_alike(oracle.run_dir / "runs.parquet")) == sorted(
        r["key"] for r in oracle.rows)
    assert len(assert_read_alike(oracle.run_dir / "steps.parquet")) == len(steps)


def test_unknown_model_name_is_a_clear_error_before_any_unit_runs(tmp_path):
    res = launch(tmp_path, "model=nosuchprovider/nosuchmodel")
    assert res.returncode == 2
    assert "nosuchprovider/nosuchmodel" in res.stderr
    assert not (tmp_path / "builtin").exists() or not list(tmp_path.rglob("rows/*.parquet"))


def test_malformed_instance_line_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = json.loads((ROOT / "raydist" / "tasks" / "builtin" / "instances.jsonl").read_text().splitlines()[0])
    bad.write_text(json.dumps(good) + "\n" + '{"instance_id": "x", "FAIL_TO_PASS": 3}\n')
    res = launch(tmp_path, "benchmark=file", f"benchmark.source={bad}", "agent=null")
    assert res.returncode == 2
    assert "bad.jsonl:2" in res.stderr


def test_unreachable_docker_daemon_is_named(tmp_path):
    res = launch(tmp_path, "agent=null", "sandbox.docker_host=unix:///tmp/raydist-no-such-daemon.sock")
    assert res.returncode == 1  # infrastructure_error: the machine, not the settings
    assert "Traceback" not in res.stderr
    assert "unix:///tmp/raydist-no-such-daemon.sock" in res.stderr
    assert "launch/setup.sh" in res.stderr


@pytest.mark.shared_data
@pytest.mark.skipif(not SHARED.exists(),
                    reason="../shared/data is absent: the realfix and offline SWE-bench tasks live there")
@pytest.mark.llm
@pytest.mark.parametrize("benchmark, n_instances", [("realfix", 6), ("swebench_offline", 3)])
def test_reference_task_files_run_through_the_same_path(tmp_path, benchmark, n_instances):
    args = (f"benchmark={benchmark}", f"data_root={SHARED}", *FULL, "seeds=[0]")
    res = launch(tmp_path, "agent=oracle", *args, timeout=3000)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = runs(tmp_path, benchmark, "oracle", "implemented__s0")
    assert len(rows) == n_instances * len(LEVELS)
    assert [(r["instance_id"], r["level"]) for r in rows if not r["resolved"]] == []
    assert all(r["memorised_count"] == 0 for r in rows)
    # The null agent at L0 (no test of FAIL_TO_PASS passes at the base) and on `full`, every
    # transformation at once (an untouched view recovers to the empty patch); every level's
    # null run is in the built-in test above.
    res = launch(tmp_path, "agent=null", *args, "levels=[L0,full]", timeout=3000)
    assert res.returncode == 0, res.stderr[-3000:]
    null_rows = runs(tmp_path, benchmark, "null", "L0_full__s0")
    assert sorted((r["instance_id"], r["level"], r["resolved"], r["model_patch"]) for r in null_rows) == sorted(
        (r["instance_id"], r["level"], False, "") for r in rows if r["level"] in ("L0", "full"))


def test_hydra_multirun_leaves_one_complete_table_per_agent_level_and_seed(tmp_path):
    res = launch(tmp_path, "--multirun", "agent=oracle,null", "levels=[L0],[L3]", "benchmark.limit=1")
    assert res.returncode == 0, res.stderr[-3000:]
    # benchmark.limit changes what a job computes, so it names a last folder of each job's directory
    got = {(agent, view): [(r["level"], r["seed"], r["outcome"])
                           for r in runs(tmp_path, "builtin", agent, f"{view}/benchmark.limit=1")]
           for agent in ("oracle", "null") for view in ("L0__s0", "L3__s0")}
    assert got == {("oracle", "L0__s0"): [("L0", 0, "resolved")], ("oracle", "L3__s0"): [("L3", 0, "resolved")],
                   ("null", "L0__s0"): [("L0", 0, "unresolved")], ("null", "L3__s0"): [("L3", 0, "unresolved")]}
    summaries = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("builtin/**/summary.md"))
    assert summaries == [f"builtin/{agent}/gemma3-270m/{view}/benchmark.limit=1/summary.md"
                         for agent in ("null", "oracle") for view in ("L0__s0", "L3__s0")]
    # The sweep's analysis report, over its four jobs, in the folder they share.
    report = tmp_path / "builtin" / "report"
    assert res.stdout.strip().splitlines()[-1] == f"report: {report / 'report.html'}"
    with open(report / "table-i.csv", newline="") as f:
        assert [(r["agent"], r["level"], r["finished"], r["Pass@1 %"], r["Δ Pass@1 (pp)"])
                for r in csv.DictReader(f)] == [
            ("null", "L0", "1", "0.0", "0.0"), ("null", "L3", "1", "0.0", "0.0"),
            ("oracle", "L0", "1", "100.0", "0.0"), ("oracle", "L3", "1", "100.0", "0.0")]
    with open(report / "significance.csv", newline="") as f:
        assert [(r["agent"], r["level"], r["paired instances"], r["p-value"]) for r in csv.DictReader(f)] == [
            ("null", "L3", "1", "1.0"), ("oracle", "L3", "1", "1.0")]


def test_a_failing_multirun_job_does_not_stop_the_next_and_the_exit_status_names_it(tmp_path):
    dead = f"unix://{tmp_path}/no-such-daemon.sock"
    res = launch(tmp_path, "--multirun", "agent=null", f"sandbox.docker_host={dead},null", "benchmark.limit=1",
                 "levels=[L0]")
    assert res.returncode == 1, res.stderr[-3000:]
    # sandbox.docker_host changes nothing computed: both jobs' directory is named by benchmark.limit alone
    assert [(r["level"], r["outcome"]) for r in runs(tmp_path, "builtin", "null", "L0__s0/benchmark.limit=1")] == [
        ("L0", "unresolved")]
    failed = [line for line in res.stderr.splitlines() if line.startswith("raydist: failed job")]
    escaped = dead.replace(":", "\\:")  # Hydra names the job in its override syntax
    assert failed == [f"raydist: failed job (exit 1): output_root={tmp_path} agent=null sandbox.docker_host={escaped} "
                      "benchmark.limit=1 "
                      f"levels=[L0] -> {tmp_path}/builtin/null/gemma3-270m/L0__s0/benchmark.limit=1"]


@pytest.mark.llm
def test_validity_gate_excludes_views_the_oracle_cannot_resolve_or_the_null_agent_resolves(tmp_path):
    """Three copies of a built-in instance: intact; with a FAIL_TO_PASS test that already passes
    at the base (so doing nothing resolves); with a gold patch that fixes nothing. Only the
    intact view reaches the LLM agent; the others are reported with their reason."""
    base = json.loads((ROOT / "raydist/tasks/builtin/instances.jsonl").read_text().splitlines()[0])
    good = dict(base, instance_id="gate-good")
    p2p = json.loads(base["PASS_TO_PASS"])  # a test that passes already, moved to FAIL_TO_PASS
    passes_already = dict(base, instance_id="gate-null-resolves", FAIL_TO_PASS=json.dumps(p2p[:1]),
                          PASS_TO_PASS=json.dumps(p2p[1:]))
    no_fix = dict(base, instance_id="gate-oracle-fails",
                  patch=base["patch"].replace('+    word = re.sub(r"_id$", "", word)',
                                              '+    word = re.sub(r"_id", "", word)  # same behaviour'))
    assert no_fix["patch"] != base["patch"]
    source = tmp_path / "gate.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (good, passes_already, no_fix)))
    res = launch(tmp_path, "benchmark=file", f"benchmark.source={source}", "levels=[L0]",
                 "agents.miniswe.step_limit=1")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = runs(tmp_path, "file", "miniswe", "L0__s0")
    assert [r["instance_id"] for r in rows] == ["gate-good"]
    gate = json.loads((tmp_path / "file" / "miniswe" / "gemma3-270m" / "L0__s0" / "gate.json").read_text())
    assert gate["checked"] == 3
    reasons = {e["instance_id"]: e["reason"] for e in gate["excluded"]}
    assert set(reasons) == {"gate-null-resolves", "gate-oracle-fails"}
    assert "null agent (no change) resolves" in reasons["gate-null-resolves"]
    assert "oracle" in reasons["gate-oracle-fails"]
    assert "2 excluded and not run" in res.stdout
    # The launch's analysis report holds the embedded model's run as its rows say.
    [row] = rows
    with open(tmp_path / "file" / "miniswe" / "gemma3-270m" / "L0__s0" / "report" / "table-i.csv", newline="") as f:
        assert [(r["model"], r["agent"], r["level"], r["finished"], float(r["Pass@1 %"]), float(r["input tokens"]))
                for r in csv.DictReader(f)] == [("gemma3-270m", "miniswe", "L0", "1", 100.0 * row["resolved"],
                                                 float(row["input_tokens"]))]
