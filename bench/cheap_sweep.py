"""Cheap units through the real driver: a stand-in for the sandboxed agent, for measuring and
testing what scales with the number of units (planning, scheduling, row writing, resume,
progress, compile, summary), not the sandbox.

``write_instances(path, n)`` writes N synthetic SWE-bench-format instances (no recipe: they
could never run in a container); ``plan_sweep`` composes the real config
(``raydist/conf/config.yaml``, ``benchmark=file``, the null agent at L0) and plans it with
``raydist.driver.plan.plan_job``; ``run_job(job, execute=cheap_execute)`` then runs it through
every phase of ``raydist.driver.drive``. ``cheap_execute`` is
``raydist.cluster.unit.execute_unit`` with ``run=cheap_run``: the row, trajectory and grading
log are assembled by the real code; only the agent and grading are replaced by a scripted
``run`` that sleeps ``instance.extra["pause_s"]`` seconds, saves a short trajectory and
returns an unresolved, submitted result.

Used by ``bench/scheduling.py`` and ``tests/test_scale.py``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_instances(path: str | Path, n: int, pause_s: float = 0.0) -> Path:
    """Write ``n`` synthetic instances (``cheap-00000`` ...) as JSONL to ``path``; each unit of
    them sleeps ``pause_s`` seconds in ``cheap_run``. Returns the path."""
    path = Path(path)
    with path.open("w") as out:
        for i in range(n):
            out.write(json.dumps({
                "instance_id": f"cheap-{i:05d}", "repo": "example/cheap", "base_commit": "0",
                "patch": CHEAP_PATCH, "test_patch": "", "problem_statement": f"synthetic instance {i}",
                "FAIL_TO_PASS": ["test_x.py::test_x"], "PASS_TO_PASS": [], "pause_s": pause_s,
            }) + "\n")
    return path


#: A one-line diff: an instance's patch must be one (``raydist.tasks.records``); no cheap unit applies it.
CHEAP_PATCH = "--- a/x.py\n+++ b/x.py\n@@ -0,0 +1 @@\n+x = 1\n"


def plan_sweep(source: str | Path, out: str | Path, *overrides: str):
    """The ``raydist.driver.plan.Job`` of the null agent at L0 seed 0 on the instances of
    ``source``, its run directory ``<out>/run``, as ``raydist.launch`` would plan it (the same
    Hydra config, composed here without Hydra's run directory)."""
    from hydra import compose, initialize_config_dir

    import raydist.launch  # noqa: F401 - registers the config's resolvers
    from raydist.driver.config import check_config
    from raydist.driver.plan import plan_job

    out = Path(out)
    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["agent=null", "benchmark=file", f"benchmark.source={source}",
                                           "levels=[L0]", "seeds=[0]", f"output_root={out}",
                                           f"cache_dir={out / 'cache'}", *overrides])
    return plan_job(check_config(cfg), out / "run")


def cheap_run(unit, instance, settings, endpoint, prepared, trajectory_path: Path) -> dict:
    """The scripted run of one cheap unit (``execute_unit``'s ``run``): sleeps, saves a
    two-message trajectory, returns a submitted, unresolved result with a grading log."""
    from raydist.agents.outcome import save_trajectory
    from raydist.cluster.outputs import grading_log

    time.sleep(float(instance.extra.get("pause_s", 0.0)))
    save_trajectory({"unit": unit.key, "messages": [{"role": "user", "content": instance.problem_statement},
                                                    {"role": "assistant", "content": "submit"}]},
                    trajectory_path)
    return {"outcome": "unresolved", "agent_exit": "submitted", "exit_status": "Submitted", "steps": 1,
            "input_tokens": 0, "output_tokens": 0, "cost": 0.0, "model_patch": "",
            "files": grading_log(unit, f"{instance.instance_id}: nothing to grade\n")}


def cheap_execute(unit, instance, settings, endpoint=None, prepared=None) -> dict:
    """``raydist.cluster.unit.execute_unit`` with ``run=cheap_run``."""
    from raydist.cluster.unit import execute_unit

    return execute_unit(unit, instance, settings, endpoint, prepared, run=cheap_run)


def sleeping_execute(unit, instance, settings, endpoint=None, prepared=None) -> dict:
    """The bare row of a finished unit after ``instance.extra["pause_s"]`` seconds (no files): the
    unit body of the scheduling comparison, the same for Ray and the thread pool."""
    time.sleep(float(instance.extra.get("pause_s", 0.0)))
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash, "resolved": False,
            "outcome": "unresolved", "agent_exit": "submitted"}


def ship_by_value() -> None:
    """Let Ray's workers unpickle this module's functions (they cannot import bench/)."""
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
