"""``benchmark=swebench``: official SWE-bench rows chosen as mini-swe-agent's batch command
chooses them (ids, then ``filter``, then ``slice``), from the shared Lite and Verified files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from raydist.driver.benchmark import BenchmarkConfig, load_benchmark
from raydist.tasks.selection import check_slice, dataset_source, select_instances

SWEBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench"
LITE, VERIFIED = SWEBENCH / "swebench_lite.jsonl", SWEBENCH / "swebench_verified_50.jsonl"
needs_data = pytest.mark.skipif(not LITE.is_file(), reason=f"{LITE} (shared reference data) is absent")


@dataclass
class Row:
    instance_id: str


ROWS = [Row(i) for i in ("django__django-1", "django__django-2", "sympy__sympy-3", "flask__flask-4",
                         "django__django-5")]


def _ids(rows) -> list[str]:
    return [r.instance_id for r in rows]


def test_filter_is_a_match_from_the_start_and_comes_before_the_slice():
    assert _ids(select_instances(ROWS, filter="django", slice_spec="1:3")) == ["django__django-2", "django__django-5"]
    assert _ids(select_instances(ROWS, filter="flask")) == ["flask__flask-4"]
    assert _ids(select_instances(ROWS, filter="sympy-3")) == []  # re.match, not re.search
    assert _ids(select_instances(ROWS, slice_spec="-2:")) == ["flask__flask-4", "django__django-5"]
    assert _ids(select_instances(ROWS, instance_ids=["django__django-5", "sympy__sympy-3"], slice_spec=":1")) == [
        "sympy__sympy-3"]  # ids keep dataset order


@pytest.mark.parametrize(("key", "kwargs", "message"), [
    ("filter", {"filter": "("}, r"^benchmark\.filter='\(': not a regular expression"),
    ("slice", {"slice_spec": "a:b"}, r"^benchmark\.slice='a:b': give start:stop"),
    ("slice", {"slice_spec": "5"}, r"^benchmark\.slice='5': give start:stop"),
    ("slice", {"slice_spec": "::0"}, r"^benchmark\.slice='::0': the step cannot be 0"),
    ("ids", {"instance_ids": ["nope__nope-1"]}, r"^benchmark\.instance_ids: 'nope__nope-1' not in the dataset"),
])
def test_a_bad_selection_names_its_key(key, kwargs, message):
    with pytest.raises(ValueError, match=message):
        select_instances(ROWS, **kwargs)


def test_dataset_names_map_as_mini_swe_agent_maps_them_and_files_stay_files():
    assert dataset_source("lite") == "hf://SWE-bench/SWE-bench_Lite@test"
    assert dataset_source("Verified", "dev") == "hf://SWE-bench/SWE-bench_Verified@dev"
    assert dataset_source("smith") == "hf://SWE-bench/SWE-smith@test"  # mini-swe-agent's, which swebench lacks
    assert dataset_source("SWE-bench/SWE-bench_Verified") == "hf://SWE-bench/SWE-bench_Verified@test"
    assert dataset_source("rows/x.parquet") == "rows/x.parquet"
    with pytest.raises(ValueError, match=r"^benchmark\.path='whatever': give a \.jsonl/\.json/\.parquet file"):
        dataset_source("whatever")
    assert check_slice("0:50") == slice(0, 50)


@pytest.mark.shared_data
@needs_data
def test_the_shared_lite_file_loads_300_official_rows_without_a_recipe():
    rows = load_benchmark(BenchmarkConfig(name="swebench", path=str(LITE)))
    assert len(rows) == 300 and all(r.recipe is None for r in rows)
    first = json.loads(LITE.open().readline())
    assert (rows[0].instance_id, rows[0].repo, rows[0].base_commit, rows[0].FAIL_TO_PASS) == (
        first["instance_id"], first["repo"], first["base_commit"], tuple(json.loads(first["FAIL_TO_PASS"])))
    assert rows[0].extra["environment_setup_commit"] == first["environment_setup_commit"]


@pytest.mark.shared_data
@needs_data
def test_filter_slice_ids_and_limit_on_the_shared_files():
    lite = [json.loads(line)["instance_id"] for line in LITE.open()]
    django = [i for i in lite if i.startswith("django__")]
    chosen = load_benchmark(BenchmarkConfig(name="swebench", path=str(LITE), filter="django__", slice="10:20"))
    assert _ids(chosen) == django[10:20] and len(django) == 114
    chosen = load_benchmark(BenchmarkConfig(name="swebench", path=str(LITE), filter="django__", slice="10:20", limit=3))
    assert _ids(chosen) == django[10:13]
    verified = [json.loads(line)["instance_id"] for line in VERIFIED.open()]
    picked = [verified[7], verified[3]]
    chosen = load_benchmark(BenchmarkConfig(name="swebench", path=str(VERIFIED), instance_ids=picked))
    assert _ids(chosen) == [verified[3], verified[7]]
    with pytest.raises(ValueError, match=r"^benchmark\.ids and benchmark\.instance_ids: give one of them"):
        load_benchmark(BenchmarkConfig(name="swebench", path=str(VERIFIED), ids=picked, instance_ids=picked))
    with pytest.raises(ValueError, match=r"^benchmark\.source='builtin' and benchmark\.path="):
        load_benchmark(BenchmarkConfig(name="swebench", path=str(VERIFIED), source="builtin"))


@pytest.mark.ray
@pytest.mark.shared_data
@needs_data
def test_an_official_row_without_a_recipe_ends_as_an_input_error_naming_its_official_image(tmp_path):
    import subprocess
    import sys

    import pyarrow.parquet as pq

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", "benchmark=swebench",
                           f"benchmark.path={LITE}", "benchmark.filter=django__django-11099", "agent=oracle",
                           "levels=[L0]", "gate=false"], cwd=root, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    [row] = pq.read_table(tmp_path / "swebench" / "oracle" / "gemma3-270m" / "L0__s0" / "runs.parquet").to_pylist()
    assert (row["instance_id"], row["outcome"], row["error_cause"]) == (
        "django__django-11099", "input_error", "no_recipe")
    assert "swebench/sweb.eval.x86_64.django_1776_django-11099:latest" in row["error"]


def test_the_official_image_is_the_rows_own_else_swebenchs_name_under_the_namespace():
    from types import SimpleNamespace

    from raydist.sandbox.official import official_image_name

    row = SimpleNamespace(instance_id="django__django-11099", extra={})
    assert official_image_name(row) == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert official_image_name(row, "registry.example:5000/mirror") == (
        "registry.example:5000/mirror/sweb.eval.x86_64.django_1776_django-11099:latest")
    assert official_image_name(SimpleNamespace(instance_id="x__y-1", extra={"image": "mine/x:1"})) == "mine/x:1"
