"""Task kinds are a seam (raydist.cluster.kinds): a third kind, defined in this file and
registered, is planned and run through the same unit path as patches and questions (image ->
view -> sandbox -> agent -> ``kind.score`` -> one row) without a change anywhere else."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import raydist.launch  # noqa: F401 - registers the config's resolvers
from raydist.agents import AgentSettings, null
from raydist.cluster.job import Job
from raydist.cluster.kinds import KINDS, AgentRun, PatchKind, QuestionKind, Score, UnknownTask, kind_of, register_kind
from raydist.cluster.unit import UnitSettings, execute_unit
from raydist.cluster.unit_key import RunUnit
from raydist.driver.config import check_config
from raydist.driver.plan import JobError, plan_job
from raydist.outcomes import ANSWERED
from raydist.sandbox.settings import SandboxSettings
from raydist.tasks import load_instances
from raydist.views import RepoFiles, ViewOptions, build_view, levels_needing

ROOT = Path(__file__).resolve().parents[1]
WCWIDTH = "jquast__wcwidth-del-control"


class CountKind:
    """A kind that asks nothing and counts: the answer is how many files the view changed."""

    name = "count"
    gated = False
    needs_tests = False
    served: tuple[str, ...] = ()

    def check_plan(self, instances, levels) -> None:
        if any("L4" in levels_needing(level) for level in levels):
            raise ValueError(f"count tasks ({len(instances)}) have nothing for L4 to rewrite")

    def check_unit(self, instance, settings) -> None:
        pass

    def run_agent(self, settings, view, box, endpoint, traj_path, instance, repo, initial) -> AgentRun:
        return AgentRun(null(view=view, sandbox=box, settings=settings.agent_settings, trajectory_path=traj_path))

    def score(self, unit, instance, settings, image, view, run) -> Score:
        return Score(ANSWERED, False, {"task": self.name, "answer": str(len(view.files))})


@pytest.fixture(scope="module")
def count_kind():
    kind = register_kind(CountKind())
    yield kind
    del KINDS[kind.name]


def counting(instance):
    return replace(instance, extra={**instance.extra, "task": "count"})


def test_an_instance_names_its_kind_and_a_patch_task_names_none(count_kind):
    [instance] = load_instances("builtin", ids=[WCWIDTH])
    assert isinstance(kind_of(instance), PatchKind)
    assert isinstance(kind_of(replace(instance, extra={"task": "qa"})), QuestionKind)
    assert kind_of(counting(instance)) is count_kind
    with pytest.raises(UnknownTask, match=r"has task 'counting'; the task kinds are count, patch, qa"):
        kind_of(replace(instance, extra={"task": "counting"}))


def test_a_kind_cannot_take_the_name_of_another(count_kind):
    with pytest.raises(ValueError, match="task kind 'patch' is already registered"):
        register_kind(type("Other", (CountKind,), {"name": "patch"})())


def plan(tmp_path: Path, *overrides: str) -> Job:
    rows = tmp_path / "count.jsonl"
    rows.write_text("".join(json.dumps(counting(i).to_record()) + "\n" for i in load_instances("builtin", limit=2)))
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)))
    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["agent=miniswe", "benchmark=file", f"benchmark.source={rows}", "gate=true",
                                           f"local_models.gemma3-270m.model_path={weights}",
                                           f"cache_dir={tmp_path / 'cache'}", *overrides])
    return plan_job(check_config(cfg), run_dir=tmp_path / "run")


def test_a_launch_of_an_ungated_kind_plans_no_gate_and_serves_no_judge(tmp_path, count_kind):
    job = plan(tmp_path, "levels=[L0,L2]")
    assert [(u.level, u.agent) for u in job.units] == [("L0", "miniswe"), ("L2", "miniswe")] * 2
    assert (job.gate, job.judge) == (None, None)


def test_a_kind_refuses_a_level_it_cannot_run_before_anything_runs(tmp_path, count_kind):
    with pytest.raises(JobError, match=r"^count tasks \(2\) have nothing for L4 to rewrite$"):
        plan(tmp_path, "levels=[L0,full]")


@pytest.mark.docker
@pytest.mark.parametrize("level", ["L0", "L3"])
def test_a_unit_of_the_third_kind_runs_in_its_sandbox_and_its_score_is_its_row(client, count_kind, level):
    from raydist.sandbox import ensure_instance_image

    cache = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
    [instance] = load_instances("builtin", ids=[WCWIDTH])
    image = ensure_instance_image(client, instance.recipe, cache_dir=cache)
    options = ViewOptions(l3_files="all")  # L3 reorders every file, not only the patched ones
    settings = UnitSettings(agent_kind="null", agent_settings=AgentSettings(), view_options=options,
                            cache_dir=str(cache), run_dir="/nonexistent", sandbox=SandboxSettings(grading_timeout_s=60))
    unit = RunUnit(WCWIDTH, instance.content_hash(), "-", "null", level, 0, "c")
    row = execute_unit(unit, counting(replace(instance, test_cmd="")), settings)  # count tasks need no tests
    changed = len(build_view(instance, RepoFiles(Path(image.repo_dir)), level, 0, options).files)
    assert (row["outcome"], row["task"], row["answer"], row["resolved"]) == (ANSWERED, "count", str(changed), False)
    assert (row["agent_exit"], row["steps"], row.get("error")) == ("submitted", 1, None)  # the null agent submits
    assert changed == {"L0": 0, "L3": 5}[level]
    assert list(row["files"]) == [f"trajectories/{WCWIDTH}__{level}__s0__{unit.key[:8]}.traj.json"]
