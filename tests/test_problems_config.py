"""The DyCodeEval launcher's settings (raydist.problems.config, the shared groups checked by its
entry raydist.launch_problems), its command-line key check (raydist.problems._jobs) and the
sweep bookkeeping every entry shares (raydist.launcher): pure, no Hydra run, no Docker, no Ray."""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
from dataclasses import fields

import pytest

from raydist._util.settings import node_types
from raydist.launch_problems import settings_of, shared_defaults
from raydist.launcher import Jobs
from raydist.models.admission import Budget
from raydist.problems._jobs import job_dir_name, unknown_override
from raydist.problems.config import ProblemsSettings, SettingError, defaults, settings_from


def test_the_defaults_are_the_values_problems_yaml_held():
    assert defaults(shared_defaults()) == {
        "pipeline": "full",
        "generation": {"model": "gemma3-270m", "variants_per_seed": 2, "scenarios": 12,
                       "domains": ["retail", "healthcare", "logistics", "education", "finance", "gaming",
                                   "agriculture", "social media"],
                       "temperature": 0.7, "seed": 0, "prompts_dir": "conf/prompts"},
        "evaluation": {"models": ["gemma3-270m"], "n": 2, "temperature": 0.8, "max_tokens": 320, "k": [1]},
        "execution": {"cpu_seconds": 5, "wall_seconds": 10.0, "memory_mb": 512, "max_processes": 64, "workers": 1},
        "requests": {"timeout_base_s": 120.0, "min_tokens_per_s": 4.0},
        "analysis": {"human_check": 10, "baselines": ["char_noise", "token_noise", "demo_deletion",
                                                      "doc_to_comments", "variable_rename", "function_rename"]},
        "budget": {"usd": None, "tokens": None},
        "data_root": "${oc.env:RAYDIST_DATA_ROOT,../shared/data}",
        "cache_dir": "${oc.env:RAYDIST_CACHE_DIR,${oc.env:HOME}/.cache/raydist}",
        "output_root": "runs",
        "storage": None,
        "benchmark": {"source": None, "path": None, "split": "test", "ids": None, "instance_ids": None, "filter": "",
                      "slice": "", "format": "swebench", "repositories": None, "releases": None, "leakage": None,
                      "min_leakage": "repair_logic", "limit": None, "kind": "tasks", "dataset": None},
        "sandbox": {"provider": "docker", "docker_host": None, "podman_socket": "unix:///run/raydist-podman.sock",
                    "base_image": None, "network": "none", "grading_timeout_s": 900.0,
                    "image_namespace": "swebench",
                    "limits": {"cpus": 1.0, "memory": "2g", "pids": 512, "file_size": "1g", "tmp_size": "512m",
                               "testbed_size": "1g"}},
        "cluster": {"address": None, "max_concurrency": 2, "cpus_per_unit": 0.5, "image_build_cpus": 1.0,
                    "sandbox_resource": "sandbox", "sandbox_per_unit": 1.0, "dashboard": False,
                    "worker_lease_s": 60.0},
    }


def _nodes(cls: type):
    yield cls
    for child in node_types(cls).values():
        yield from _nodes(child)


def _documented_fields(cls: type) -> set[str]:
    """The fields of dataclass ``cls`` followed by a docstring in its class body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    return {stmt.target.id for stmt, after in zip(body, body[1:], strict=False)
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str) and after.value.value.strip()}


def test_every_setting_says_what_it_means():
    undocumented = [f"{node.__name__}.{f.name}" for node in _nodes(ProblemsSettings) for f in fields(node)
                    if f.name not in _documented_fields(node)]
    assert undocumented == []
    assert node_types(ProblemsSettings)["budget"] is Budget  # the runtime class itself: no mirror


@pytest.mark.parametrize(("data", "message"), [
    ({"generation": {"model": "x", "colour": "red"}},
     "generation.colour: unknown setting; generation takes model, variants_per_seed, scenarios, domains, "
     "temperature, seed, prompts_dir"),
    ({"colour": "red"}, "colour: unknown setting; the launch takes pipeline, generation, evaluation, execution, "
                        "requests, analysis, budget, data_root, cache_dir, output_root, storage, benchmark, "
                        "sandbox, "
                        "cluster, local_models"),
    ({"evaluation": {"n": "2"}}, "evaluation.n='2': give a whole number of at least 1"),
    ({"evaluation": {"n": 2.5}}, "evaluation.n=2.5: give a whole number of at least 1"),
    ({"evaluation": {"k": [1, 0]}}, "evaluation.k=0: give a whole number of at least 1"),
    ({"evaluation": {"models": 3.5}}, "evaluation.models=3.5: give a list, e.g. [a,b]"),
    ({"execution": {"wall_seconds": 0}}, "execution.wall_seconds=0: give a number above 0"),
    ({"pipeline": "all"}, "pipeline='all': choose one of full, generate, evaluate"),
    ({"generation": 3}, "generation=3: give a mapping of model, variants_per_seed, scenarios, domains, "
                        "temperature, seed, prompts_dir"),
    ({"output_root": " "}, "output_root is empty: give a folder for the run directories (default: runs)"),
    ({"generation": {"domains": ["retail", " "]}},
     "generation.domains=['retail', ' ']: give at least one seed domain, e.g. [retail]"),
    # the groups shared with the main launcher are checked by its schema (raydist.driver.config)
    ({"sandbox": {"limits": {"memory": "lots"}}}, "sandbox.limits: sandbox limit memory='lots' is not a positive "
                                                  "Docker size such as '512m' or '2g'; fix sandbox.limits"),
    ({"sandbox": {"netwrok": "none"}}, "config key sandbox.netwrok: not a setting; allowed keys there: provider, "
                                       "docker_host, podman_socket, base_image, network, limits, grading_timeout_s, "
                                       "image_namespace"),
    ({"cluster": {"max_concurrency": 0}}, "cluster.max_concurrency=0: must be at least 1"),
])
def test_a_wrong_setting_is_one_line_naming_the_key_and_what_it_takes(data, message):
    with pytest.raises(SettingError) as caught:
        settings_of(data)
    assert str(caught.value) == message


def test_one_name_given_alone_is_a_list_of_one():
    settings = settings_from({"evaluation": {"models": "m", "k": 1}, "generation": {"domains": "retail"}})
    assert (settings.evaluation.models, settings.evaluation.k, settings.generation.domains) == (("m",), (1,),
                                                                                               ("retail",))


def test_the_command_line_key_check_names_an_unknown_key_without_a_plus():
    assert unknown_override(["generation.colour=red"]) == (
        "generation.colour: unknown setting; generation takes model, variants_per_seed, scenarios, domains, "
        "temperature, seed, prompts_dir")
    assert unknown_override(["evaluation.n.x=1"]) is None  # n is a value: its type check names it
    assert unknown_override(["--multirun", "benchmark.ids=[a],[b]", "hydra.run.dir=x", "hydra/job_logging=none",
                             "+generation.colour=red", "evaluation.n=3", "benchmark=mbpp"]) is None


def test_each_sweep_job_gets_its_own_directory_named_by_its_settings():
    first = job_dir_name(["benchmark.ids=[HumanEval/0]", "evaluation.n=2", "output_root=/tmp/x",
                          "+local_models.s.api_base=http://127.0.0.1:9/v1", "generation.model=s", "benchmark=mbpp"])
    second = job_dir_name(["benchmark.ids=[HumanEval/2]", "evaluation.n=2", "output_root=/tmp/x"])
    # paths, endpoints and what the directory's path already names (benchmark, generator) are left out
    assert (first, second) == ("benchmark.ids=_HumanEval_0_,evaluation.n=2",
                               "benchmark.ids=_HumanEval_2_,evaluation.n=2")
    assert job_dir_name(["evaluation.models=[a/b,c]"]) == "evaluation.models=_a_b,c_"
    assert job_dir_name(["evaluation.n=2", "generation.seed=1", "evaluation.n=3"]) == "generation.seed=1,evaluation.n=3"
    long = job_dir_name([f"generation.domains=[{'x' * 200}]"])
    assert len(long) == 153 and long.startswith("generation.domains=_xxx")
    assert long != job_dir_name([f"generation.domains=[{'x' * 201}]"])
    assert job_dir_name([]) == "default"
    assert job_dir_name(["cluster=remote", "cluster.max_concurrency=8", "hydra.verbose=true"]) == "default"


def test_a_dashboard_address_is_refused_naming_cluster_address():
    with pytest.raises(SettingError) as caught:
        settings_of({"cluster": {"address": "http://head:8265", "max_concurrency": 2}})
    assert str(caught.value).startswith("cluster.address=http://head:8265: that is the Ray dashboard (job "
                                        "submission) address")


def test_the_exit_status_of_a_sweep_is_the_worst_job_and_names_the_failed_ones():
    jobs, out = Jobs(), io.StringIO()
    jobs.record("runs/a", 0)
    jobs.record("runs/b", 1)
    jobs.record("runs/c", 2)
    assert jobs.status(file=out) == 2
    assert out.getvalue().splitlines() == ["raydist: failed job (exit 1): (defaults) -> runs/b",
                                           "raydist: failed job (exit 2): (defaults) -> runs/c",
                                           "raydist: 2 of 3 jobs failed: runs/b (exit 1), runs/c (exit 2)"]
    single, out = Jobs(), io.StringIO()
    single.record("runs/a", 1)
    assert single.status(file=out) == 1 and out.getvalue() == ""
