"""``storage=``: run directories mirrored to a folder or a ``pyarrow.fs`` URI, the shared
caches kept where every node finds them, and a storage that cannot be used refused before
anything runs. Only local filesystems are exercised (a plain path and ``file://``): no object
store is reachable here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray
import test_cluster_nodes
from omegaconf import OmegaConf
from test_cluster_nodes import forbid_writes

from raydist._util.storage import (
    JsonCache,
    Storage,
    StorageError,
    open_storage,
    pull,
    push,
)
from raydist.cluster.unit_key import RunUnit
from raydist.problems.llm import RecordedLLM
from raydist.results import ResultStore

ROOT = Path(__file__).resolve().parents[1]
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/
ray.cloudpickle.register_pickle_by_value(test_cluster_nodes)

UNIT = RunUnit("pkg__issue-7", "h", "-", "null", "L0", 3, "c")


def _row(unit: RunUnit, **extra) -> dict:
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash, "resolved": False,
            "outcome": "unresolved", "agent_exit": "submitted", **extra}


# --- the mirror ---------------------------------------------------------------------------


def test_a_row_written_with_a_mirror_is_copied_there_with_its_steps_and_files(tmp_path):
    mirror = Storage(f"file://{tmp_path}/store/run")
    store = ResultStore(tmp_path / "run", mirror=mirror)
    steps = [{"step": 1, "command": "ls", "executed": "ls", "category": "navigate", "returncode": 0}]
    store.write_row(_row(UNIT, step_records=steps, files={"grading/u.grading.log": "1 failed\n"}))
    key = UNIT.key
    assert mirror.files() == {
        f"rows/{key}.parquet": (tmp_path / f"run/rows/{key}.parquet").stat().st_size,
        f"steps/{key}.parquet": (tmp_path / f"run/steps/{key}.parquet").stat().st_size,
        "grading/u.grading.log": 9}
    assert pq.read_table(tmp_path / f"store/run/rows/{key}.parquet").to_pylist()[0]["outcome"] == "unresolved"
    # A later attempt without steps leaves no stale steps file in the mirror either.
    store.write_row(_row(UNIT, outcome="infrastructure_error", error_cause="docker", error="gone"))
    assert sorted(mirror.files()) == ["grading/u.grading.log", f"rows/{key}.parquet"]
    assert pq.read_table(tmp_path / f"store/run/rows/{key}.parquet").to_pylist()[0]["outcome"] == (
        "infrastructure_error")


def test_push_copies_what_the_storage_lacks_or_holds_otherwise_and_every_table_and_pull_never_overwrites(tmp_path):
    local, mirror = tmp_path / "run", Storage(str(tmp_path / "store"))
    for name, text in {"rows/a.parquet": "A", "rows/b.parquet": "B", "summary.md": "S", ".launch.lock": "1"}.items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_text(text)
    assert push(local, mirror) == 3  # never the lock
    assert mirror.files() == {"rows/a.parquet": 1, "rows/b.parquet": 1, "summary.md": 1}
    (local / "rows/b.parquet").write_text("BB")
    assert push(local, mirror) == 2  # b (another size) and summary.md (a table: always); not a
    assert mirror.read_bytes("rows/b.parquet") == b"BB"
    mirror.write_bytes("rows/c.parquet", b"C")
    mirror.write_bytes("rows/a.parquet", b"other")
    fresh = tmp_path / "elsewhere"
    assert pull(mirror, fresh) == 4
    assert pull(mirror, local) == 1  # only c: a is this machine's copy and stays
    assert ((local / "rows/a.parquet").read_text(), (local / "rows/c.parquet").read_text()) == ("A", "C")


# --- caches across nodes ------------------------------------------------------------------


class CountingComplete:
    """A model that answers ``answer to <last message>`` and counts its calls."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, messages, *, seed, max_tokens, grammar=None):
        self.asked += 1
        return f"answer to {messages[-1]['content']}"


def ask_once(cache, forbidden: str) -> dict:
    """On a worker node that cannot write ``forbidden`` (the driver's cache folder): one request
    through a ``RecordedLLM`` on ``cache``."""
    forbid_writes(forbidden)
    complete = CountingComplete()
    llm = RecordedLLM(complete, model="m", cache=cache)
    answer = llm("rewrite", [{"role": "user", "content": "sort a list"}], seed=3, max_tokens=64)
    [call] = llm.calls
    return {"answer": answer, "cached": call["cached"], "asked": complete.asked, "hash": call["request_hash"],
            "node": ray.get_runtime_context().get_node_id()}


@pytest.mark.ray
def test_an_answer_cached_by_a_task_on_node_a_is_found_by_a_task_on_node_b(tmp_path):
    from ray.cluster_utils import Cluster

    from raydist.cluster.cache_host import host_cache

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        node_a = cluster.add_node(num_cpus=1, resources={"node_a": 1})
        node_b = cluster.add_node(num_cpus=1, resources={"node_b": 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        task = ray.remote(ask_once)
        driver_disk = tmp_path / "cache_dir" / "problems" / "llm"
        in_storage = tmp_path / "store" / "_cache" / "problems" / "llm"
        for folder, storage in ((driver_disk, Storage(str(driver_disk))), (in_storage, Storage(f"file://{in_storage}"))):
            cache = host_cache(storage)
            first = ray.get(task.options(resources={"node_a": 1}).remote(cache, str(tmp_path)))
            second = ray.get(task.options(resources={"node_b": 1}).remote(cache, str(tmp_path)))
            assert (first["node"], second["node"]) == (node_a.node_id, node_b.node_id)
            assert (first["cached"], first["asked"]) == (False, 1)
            assert (second["cached"], second["asked"]) == (True, 0)  # no second model call
            assert second["answer"] == first["answer"] == "answer to sort a list"
            # The entry is in the driver's folder, written by the driver-side actor.
            assert sorted(p.name for p in folder.iterdir()) == [f"{first['hash']}.json"]
            assert JsonCache(folder).get(first["hash"])["answer"] == "answer to sort a list"
        # The guard is real: the worker itself cannot write there.
        attempt = ray.remote(_write_json).options(resources={"node_b": 1}).remote(str(tmp_path), str(folder))
        assert ray.get(attempt).startswith("PermissionError")
    finally:
        ray.shutdown()
        cluster.shutdown()


def _write_json(forbidden: str, folder: str) -> str:
    forbid_writes(forbidden)
    try:
        JsonCache(folder).put("x", {"a": 1})
    except PermissionError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "written"


def _job(tmp_path, *overrides: str):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from raydist.driver.config import check_config
    from raydist.driver.plan import plan_job

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"output_root={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}",
                                           "agent=oracle", "benchmark.limit=1", "levels=[L1]", *overrides])
    GlobalHydra.instance().clear()
    OmegaConf.resolve(cfg)
    return plan_job(check_config(cfg), tmp_path / "runs" / "job")


@pytest.mark.parametrize("storage", [None, "file://{tmp}/store", "{tmp}/shared"])
def test_the_views_phase_reads_a_preparation_from_the_storage_and_runs_none(tmp_path, storage):
    from raydist._util.storage import JsonCache
    from raydist.cluster import execute as phases
    from raydist.cluster.prepare import preparation_tasks, task_key

    uri = None if storage is None else storage.format(tmp=tmp_path)
    job = _job(tmp_path, *([] if uri is None else [f"storage={uri}"]))
    [task] = preparation_tasks(job.units)
    key = task_key(task, job.instances[task.instance_id], job.settings.view_options, job.view_model.identity)
    where = {None: tmp_path / "cache" / "views", "file://{tmp}/store": tmp_path / "store" / "_cache" / "views",
             "{tmp}/shared": tmp_path / "shared" / "_cache" / "views"}[storage]
    record = {"text": "a paraphrase", "source": "paraphrase", "attempts": 1, "history": []}
    JsonCache(where).put(key, record)

    from raydist.cluster.serving import ModelServers

    with ModelServers() as servers:  # Ray is not started: nothing may run, no model may be served
        views = phases.views(job, job.units, job.settings, servers)
    assert dict(views.records) == {(task.instance_id, task.seed, "L1"): record}
    assert views.prepared(job.units[0])[0].statement == "a paraphrase"
    assert sorted(p.name for p in where.iterdir()) == [f"{key}.json"]


# --- launches -----------------------------------------------------------------------------


def _launch(module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


BAD = {"scheme": ("ftp://host/runs", ("storage='ftp://host/runs': unknown scheme 'ftp'; give a folder or a URI of "
                                      "file://, s3://")),
       "unwritable": ("{tmp}/a-file/runs", "storage='{tmp}/a-file/runs' cannot be written: NotADirectoryError: ")}


def _bad(tmp_path, kind: str) -> tuple[str, str]:
    (tmp_path / "a-file").write_text("not a folder")
    storage, message = BAD[kind]
    return storage.format(tmp=tmp_path), message.format(tmp=tmp_path)


def _launch_args(tmp_path, module: str, storage: str) -> list[str]:
    extra = ["agent=null", "levels=[L0]"] if module == "raydist.launch" else ["benchmark=humaneval",
                                                                              "benchmark.ids=[HumanEval/0]"]
    return [f"output_root={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}", f"storage={storage}",
            "benchmark.limit=1", "sandbox.docker_host=unix:///nonexistent.sock", *extra]


def _nothing_ran(tmp_path) -> bool:
    """No launch took a run directory (its lock) and no record was written (Hydra's own files may be)."""
    made = {p.name for p in (tmp_path / "runs").rglob("*")} if (tmp_path / "runs").exists() else set()
    return not made & {".launch.lock", "rows", "variants", "settings.json"}


@pytest.mark.parametrize("module, kind", [("raydist.launch", "unwritable"), ("raydist.launch_problems", "scheme")])
def test_a_storage_that_cannot_be_used_exits_2_naming_the_setting_before_anything_runs(tmp_path, module, kind):
    storage, message = _bad(tmp_path, kind)
    res = _launch(module, *_launch_args(tmp_path, module, storage))
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-1].startswith(f"raydist: error: {message}")
    assert "Docker" not in res.stderr and "Traceback" not in res.stderr
    assert _nothing_ran(tmp_path)


@pytest.mark.parametrize("module, kind", [("raydist.launch", "scheme"), ("raydist.launch_problems", "unwritable")])
def test_each_launcher_refuses_either_kind_of_bad_storage_with_status_2(tmp_path, capsys, module, kind):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import raydist.launch
    import raydist.launch_problems
    from raydist.launcher import Jobs, run_one

    storage, message = _bad(tmp_path, kind)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config" if module == "raydist.launch" else "problems",
                      overrides=_launch_args(tmp_path, module, storage))
    GlobalHydra.instance().clear()
    entry = raydist.launch.ENTRY if module == "raydist.launch" else raydist.launch_problems.ENTRY
    assert run_one(entry, Jobs(), cfg, str(tmp_path / "runs" / "job"), "") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"raydist: error: {message}")
    assert _nothing_ran(tmp_path)


def test_open_storage_proves_a_folder_writable_and_leaves_nothing_behind(tmp_path):
    storage = open_storage(f"file://{tmp_path}/new/folder")
    assert storage.local_path() == tmp_path / "new" / "folder"
    assert list((tmp_path / "new" / "folder").iterdir()) == []
    with pytest.raises(StorageError, match="^storage is empty"):
        open_storage(" ")


RUN = "builtin/null/gemma3-270m/L0__s0"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("client")  # the daemon and base image must exist
def test_a_launch_writes_its_run_directory_to_the_storage_and_a_launch_elsewhere_resumes_from_it(tmp_path):
    """The first launch names the storage as a ``file://`` URI, the second, elsewhere, as a plain
    path to the same folder: both spellings reach it."""
    common = [f"cache_dir={tmp_path / 'cache'}", "agent=null", "benchmark.limit=1", "levels=[L0]"]
    first = _launch("raydist.launch", f"output_root={tmp_path / 'here'}", f"storage=file://{tmp_path}/store", *common)
    assert first.returncode == 0, first.stderr[-3000:]
    here, kept = tmp_path / "here" / RUN, tmp_path / "store" / RUN
    files = sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file())
    # Everything of the run directory but the lock (.hydra, tables, summary, the unit's files); the
    # analysis report is written after the launch, on the machine that ran it.
    assert files == sorted(p.relative_to(here).as_posix() for p in here.rglob("*")
                           if p.is_file() and p.name != ".launch.lock" and not p.relative_to(here).parts[0] == "report")
    assert (here / "report" / "report.html").is_file()
    [row] = [f for f in files if f.startswith("rows/")]
    assert {"runs.parquet", "steps.parquet", "preds/null__null__L0__s0.jsonl", "summary.md",
            ".hydra/config.yaml"} <= set(files)
    assert [f.split("/")[0] for f in files if f.startswith(("trajectories/", "grading/"))] == [
        "grading", "trajectories"]
    assert (kept / "runs.parquet").read_bytes() == (here / "runs.parquet").read_bytes()
    # Another machine (another output_root, empty) resumes from the storage: nothing runs again.
    second = _launch("raydist.launch", f"output_root={tmp_path / 'there'}", f"storage={tmp_path}/store", *common)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "1 units planned, 1 finished before, 0 to run" in second.stdout
    assert (tmp_path / "there" / RUN / row).read_bytes() == (kept / row).read_bytes()
    assert pq.read_table(tmp_path / "there" / RUN / "runs.parquet").column("key").to_pylist() == [
        Path(row).stem]
