"""Official SWE-bench rows on images in the official layout: an image built here from a shared
offline instance (``raydist.tasks.official_build``), its 5.x row (``image``, ``eval_script``,
``log_parser``, ``eval_type``, no recipe), units on that image graded by swebench's eval script
and report (``raydist.grading.official``) at L0, at the L2/L3 views, and at L4 and ``full``,
whose rewrites are gated by the same eval script on the same image."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ROOT.parent / "shared" / "data" / "swebench" / "offline.jsonl"
INSTANCE = "pallets__flask-4992"
NAMESPACE = "raydist-test"  # not swebench's: never mistaken for a pulled image

pytestmark = [pytest.mark.docker, pytest.mark.shared_data,
              pytest.mark.skipif(not OFFLINE.is_file(), reason=f"{OFFLINE} (shared reference data) is absent")]


CACHE = Path.home() / ".cache" / "raydist"


@pytest.fixture(scope="module")
def official_row_list() -> list[dict]:
    """The 5.x rows of every shared offline instance, their images built in the official layout."""
    from raydist.sandbox import connect
    from raydist.tasks import load_instances
    from raydist.tasks.official_build import build_official_image

    client = connect()
    return [build_official_image(client, instance, cache_dir=CACHE, namespace=NAMESPACE)
            for instance in load_instances(str(OFFLINE))]


@pytest.fixture(scope="module")
def official_rows(official_row_list, tmp_path_factory) -> Path:
    [row] = [r for r in official_row_list if r["instance_id"] == INSTANCE]
    path = tmp_path_factory.mktemp("official") / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


@pytest.fixture(scope="module")
def all_official_rows(official_row_list, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("official-all") / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in official_row_list))
    return path


def test_the_row_is_swebench_5_schema_and_its_test_spec_is_swebenchs(official_rows):
    from raydist.grading.official import test_spec_of
    from raydist.tasks import load_instances

    row = json.loads(official_rows.read_text())
    assert row["image"] == "raydist-test/sweb.eval.x86_64.pallets_1776_flask-4992:latest"
    assert not {"sdist", "install", "test_cmd"} & set(row) and row["log_parser"] == "parse_log_pytest"
    [instance] = load_instances(str(official_rows))
    spec = test_spec_of(instance)
    assert spec.eval_script.count(">>>>> Test Exit Code") == 1  # make_test_spec records the exit status
    assert f"git checkout {row['base_commit']} tests/static/config.toml tests/test_config.py" in spec.eval_script


def test_gold_resolves_an_empty_patch_does_not_and_an_early_exit_is_not_a_pass(official_rows):
    from raydist.grading.official import grade_official
    from raydist.sandbox import connect
    from raydist.tasks import load_instances

    [instance] = load_instances(str(official_rows))
    client, image = connect(), instance.extra["image"]
    gold = grade_official(client, instance, image, instance.patch, timeout=600)
    assert (gold.resolved, gold.grading_channel, gold.missing, gold.error) == (True, "official", 0, None)
    assert set(gold.fail_to_pass.values()) == {"PASSED"} and len(gold.pass_to_pass) == 18
    empty = grade_official(client, instance, image, "", timeout=600)
    assert (empty.resolved, empty.fail_to_pass["tests/test_config.py::test_config_from_file_toml"]) == (False, "FAILED")
    # The patch's code ends the test process at once with status 0, before any test: no result is a pass.
    exiting = ("diff --git a/tests/conftest.py b/tests/conftest.py\n--- a/tests/conftest.py\n+++ b/tests/conftest.py\n"
               "@@ -1,3 +1,5 @@\n+import os\n+os._exit(0)\n")
    early = grade_official(client, instance, image, exiting, timeout=600)
    assert early.resolved is False and early.error_cause in ("tests_not_reported", "patch_does_not_apply")


def _launch(tmp_path: Path, rows: Path, agent: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", "benchmark=swebench",
                           f"benchmark.path={rows}", f"agent={agent}", "levels=[L0,L2,L3]"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "swebench" / agent / "gemma3-270m" / "L0_L2_L3__s0"
    return pq.read_table(run / "runs.parquet").to_pylist()


@pytest.mark.ray
@pytest.mark.slow  # two launches of three units, each graded by its eval script: about 2 minutes
def test_oracle_resolves_and_null_does_not_at_l0_and_the_l2_l3_views(official_rows, tmp_path):
    rows = _launch(tmp_path, official_rows, "oracle")
    assert [(r["level"], r["resolved"], r["grading_channel"]) for r in rows] == [
        ("L0", True, "official"), ("L2", True, "official"), ("L3", True, "official")]
    run = tmp_path / "swebench" / "oracle" / "gemma3-270m" / "L0_L2_L3__s0"
    assert len(list((run / "grading").glob("*.grading.log"))) == 3
    pred = json.loads((run / "preds" / "oracle__oracle__L2__s0.jsonl").read_text())
    assert pred["instance_id"] == INSTANCE and pred["model_patch"].startswith("diff --git a/src/flask/config.py")
    rows = _launch(tmp_path, official_rows, "null")
    assert [(r["level"], r["resolved"], r["outcome"]) for r in rows] == [
        ("L0", False, "unresolved"), ("L2", False, "unresolved"), ("L3", False, "unresolved")]


@pytest.mark.ray
def test_a_row_whose_image_is_neither_here_nor_pullable_is_an_infrastructure_error_naming_it(official_rows, tmp_path):
    row = json.loads(official_rows.read_text())
    row["image"] = "raydist-test/sweb.eval.x86_64.nowhere_1776_none-1:latest"
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    done = subprocess.run([sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", "benchmark=swebench",
                           f"benchmark.path={rows}", "agent=oracle", "levels=[L0]", "resume.max_attempts=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    [unit] = pq.read_table(tmp_path / "swebench" / "oracle" / "gemma3-270m" / "L0__s0" / "runs.parquet").to_pylist()
    assert (unit["outcome"], unit["error_cause"]) == ("infrastructure_error", "official_image")
    assert unit["error"].startswith(f"InfrastructureError: instance {INSTANCE!r}: its image {row['image']} is not in")


def test_the_l4_gate_refuses_a_rewrite_that_breaks_a_test_through_the_official_channel(official_rows):
    from raydist.cluster.rewrites import rewrite_gate
    from raydist.grading import OfficialRunner, runner_for
    from raydist.sandbox import connect
    from raydist.sandbox.official import official_repo_dir
    from raydist.tasks import load_instances
    from raydist.views import RepoFiles
    from raydist.views.l4.prepare import GateVerdict

    [instance] = load_instances(str(official_rows))
    client, image = connect(), instance.extra["image"]
    runner = runner_for(client, instance, image, timeout=600)
    assert isinstance(runner, OfficialRunner)
    repo = RepoFiles(official_repo_dir(client, image, CACHE))
    gate = rewrite_gate(runner, instance, repo)
    path = "src/flask/config.py"
    text = repo.read(path)
    broken = text.replace("key = key.lower()\n", "key = key.upper()\n", 1)  # in get_namespace
    assert broken != text
    verdict = gate({path: broken})
    assert verdict.passed is False
    assert verdict.feedback.splitlines()[:2] == [
        "These tests passed before the rewrite and fail after it: tests/test_config.py::test_get_namespace",
        "Test output (official, tail):"]
    assert gate({path: text}) == GateVerdict(True, "")


def test_l4_of_a_row_with_neither_a_recipe_nor_an_eval_script_is_an_input_error_saying_why(official_rows):
    from dataclasses import replace

    from raydist.cluster.prepare import PrepTask, run_preparation
    from raydist.outcomes import InputError
    from raydist.tasks import load_instances
    from raydist.views import ViewOptions

    [instance] = load_instances(str(official_rows))
    bare = replace(instance, extra={k: v for k, v in instance.extra.items() if k != "eval_script"})
    with pytest.raises(InputError, match=r"^L4 of 'pallets__flask-4992' needs a row with an sdist recipe or an "
                                         r"official SWE-bench 5.x row \(image, eval_script\)") as raised:
        run_preparation(PrepTask(INSTANCE, 0, "L4"), bare, ViewOptions(l4_llm_attempts=0), cache_dir=str(CACHE),
                        grading_timeout_s=600)
    assert raised.value.cause == "l4_needs_recipe"


@pytest.mark.ray
@pytest.mark.slow  # two launches of six units on three official images, L4 gated by the eval scripts
def test_oracle_resolves_every_official_row_and_null_none_at_l4_and_full(all_official_rows, tmp_path):
    from tests.launches import launch, runs

    ids = sorted(json.loads(line)["instance_id"] for line in all_official_rows.read_text().splitlines())
    assert len(ids) == 3
    # A cache of its own: the L4 rewrites are made and gated here, never read from an earlier launch's cache.
    cache = tmp_path / "cache"
    for agent, resolved, outcome in (("oracle", True, "resolved"), ("null", False, "unresolved")):
        done = launch(tmp_path, "benchmark=swebench", f"benchmark.path={all_official_rows}", f"agent={agent}",
                      "levels=[L4,full]", "seeds=[0]", "view.l1_attempts=1", "view.l4_llm_attempts=0",
                      f"cache_dir={cache}")
        assert done.returncode == 0, done.stderr[-3000:]
        rows = runs(tmp_path, "swebench", agent, "L4_full__s0")
        assert sorted((r["instance_id"], r["level"], r["resolved"], r["outcome"], r["grading_channel"])
                      for r in rows) == [(i, level, resolved, outcome, "official") for i in ids
                                         for level in ("L4", "full")]
        # L4 rewrote the function around each gold patch, kept by the eval script's gate.
        assert {(r["instance_id"], tuple(json.loads(r["view_meta"])["l4_files"])) for r in rows} == {
            ("pallets__flask-4992", ("src/flask/config.py",)), ("pallets__flask-5063", ("src/flask/cli.py",)),
            ("pydata__xarray-7393", ("xarray/core/indexing.py",))}
