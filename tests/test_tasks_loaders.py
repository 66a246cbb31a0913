"""Loaders on the real reference files and on malformed files; round trips through every format."""

import json
from pathlib import Path

import pytest

from raydist.tasks import MalformedInstance, load_instances, write_instances

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PATCH = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared reference data not found at {DATA}")


@needs_data
def test_realfix_loads_six_sdist_instances():
    instances = load_instances(str(DATA / "tasks" / "realfix.jsonl"))
    assert len(instances) == 6
    assert instances[0].instance_id == "r1chardj0n3s__parse-1269006"
    assert instances[0].FAIL_TO_PASS == ("test_parse.py::TestBugs::test_match_trailing_newline",)
    assert instances[0].recipe.sdist.filename == "parse-1.18.0.tar.gz"
    assert {i.recipe.install for i in instances} == {("pytest==8.3.4",)}
    assert instances[0].extra["test_files"] == ["test_parse.py"]


@needs_data
def test_offline_swebench_loads_pins_and_install_command():
    instances = {i.instance_id: i for i in load_instances(str(DATA / "swebench" / "offline.jsonl"))}
    assert sorted(instances) == ["pallets__flask-4992", "pallets__flask-5063", "pydata__xarray-7393"]
    xarray = instances["pydata__xarray-7393"]
    assert xarray.recipe.install[:2] == ("attrs==22.1.0", "bottleneck==1.3.5")
    assert len(xarray.recipe.install) == 21
    assert xarray.recipe.install_repo == "pip install --no-deps -e ."
    assert xarray.FAIL_TO_PASS == ("xarray/tests/test_indexes.py::test_restore_dtype_on_multiindexes[int32]",
                                   "xarray/tests/test_indexes.py::test_restore_dtype_on_multiindexes[float32]")
    assert instances["pallets__flask-4992"].FAIL_TO_PASS == ("tests/test_config.py::test_config_from_file_toml",)


@needs_data
def test_offline_install_as_python_literal_normalises_to_same_tuple(tmp_path):
    src = DATA / "swebench" / "offline.jsonl"
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    rows[2]["install"] = str(rows[2]["install"])
    rows[2]["FAIL_TO_PASS"] = str(json.loads(rows[2]["FAIL_TO_PASS"]))
    (tmp_path / "lit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_instances(str(tmp_path / "lit.jsonl")) == load_instances(str(src))


@needs_data
def test_swebench_lite_loads_300_without_recipes():
    instances = load_instances(str(DATA / "swebench" / "swebench_lite.jsonl"))
    assert len(instances) == 300
    assert all(i.recipe is None and i.test_cmd == "" for i in instances)
    assert instances[0].instance_id == "astropy__astropy-12907"
    assert sorted(instances[0].extra) == ["created_at", "environment_setup_commit", "hints_text"]


@needs_data
def test_ids_select_in_source_order_and_limit_cuts():
    path = str(DATA / "swebench" / "swebench_lite.jsonl")
    picked = load_instances(path, ids=["django__django-11099", "astropy__astropy-12907"])
    assert [i.instance_id for i in picked] == ["astropy__astropy-12907", "django__django-11099"]
    assert len(load_instances(path, limit=5)) == 5


@needs_data
def test_unknown_ids_are_named():
    with pytest.raises(ValueError, match=r"unknown instance ids 'nope__x-1', 'nope__y-2'"):
        load_instances(str(DATA / "tasks" / "realfix.jsonl"),
                       ids=["nope__x-1", "r1chardj0n3s__parse-1269006", "nope__y-2"])


def good(instance_id="o__r-1"):
    return {"instance_id": instance_id, "repo": "o/r", "base_commit": "a", "patch": PATCH, "test_patch": "",
            "problem_statement": "s", "FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": ["t::b"], "version": "1"}


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_bad_json_line_names_file_and_line(tmp_path):
    path = write_lines(tmp_path / "i.jsonl", [json.dumps(good()), "{not json"])
    with pytest.raises(MalformedInstance, match=rf"^{path}:2: is not valid JSON \(Expecting property name"):
        load_instances(path)


def test_missing_field_names_file_line_and_field(tmp_path):
    broken = good("o__r-2")
    del broken["problem_statement"]
    path = write_lines(tmp_path / "i.jsonl", [json.dumps(good()), "", json.dumps(broken)])
    with pytest.raises(MalformedInstance) as caught:
        load_instances(path)
    assert str(caught.value) == f"{path}:3: field 'problem_statement' is missing; fix or remove the line"


def test_wrong_type_names_file_line_and_field(tmp_path):
    path = write_lines(tmp_path / "i.jsonl", [json.dumps(good() | {"FAIL_TO_PASS": 5})])
    with pytest.raises(MalformedInstance) as caught:
        load_instances(path)
    assert str(caught.value) == (
        f"{path}:1: field 'FAIL_TO_PASS' is not a list of test ids (got int); fix or remove the line")


def test_duplicate_id_names_both_lines(tmp_path):
    path = write_lines(tmp_path / "i.jsonl", [json.dumps(good()), json.dumps(good("o__r-2")), json.dumps(good())])
    with pytest.raises(MalformedInstance) as caught:
        load_instances(path)
    assert str(caught.value) == (
        f"{path}:3: field 'instance_id' repeats 'o__r-1', first seen at {path}:1; fix or remove the line")


def test_json_record_errors_name_the_record(tmp_path):
    (tmp_path / "i.json").write_text(json.dumps([good(), good() | {"repo": 3}]))
    with pytest.raises(MalformedInstance,
                       match=r"i\.json:2: field 'repo' is not a string \(got int\); fix or remove that record"):
        load_instances(str(tmp_path / "i.json"))


def test_missing_file_names_path_and_config_key(tmp_path):
    missing = tmp_path / "absent.jsonl"
    with pytest.raises(FileNotFoundError, match=rf"'{missing}' does not exist; check the config key benchmark.source"):
        load_instances(str(missing))


def test_unknown_suffix_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"unknown instance source; use 'builtin'"):
        load_instances(str(tmp_path / "i.csv"))


def test_negative_limit_is_refused():
    with pytest.raises(ValueError, match=r"limit must be >= 0 \(got -1\)"):
        load_instances("builtin", limit=-1)


@pytest.mark.parametrize("suffix", ["jsonl", "json", "parquet"])
def test_round_trip_through_each_format(tmp_path, suffix):
    sources = ["builtin"]
    if DATA.is_dir():
        sources += [str(DATA / "tasks" / "realfix.jsonl"), str(DATA / "swebench" / "offline.jsonl"),
                    str(DATA / "swebench" / "swebench_lite.jsonl")]
    # offline.jsonl rebuilds two Lite instances under the same ids; one copy of each suffices here.
    instances = list({i.instance_id: i for source in reversed(sources) for i in load_instances(source)}.values())
    assert len(instances) == (6 + 6 + 3 + 300 - 2 if DATA.is_dir() else 6)
    path = write_instances(instances, tmp_path / f"all.{suffix}")
    assert load_instances(str(path)) == instances


@pytest.mark.parametrize("suffix", ["jsonl", "json", "parquet"])
def test_a_rewrite_replaces_the_file_whole_and_leaves_no_temporary_file(tmp_path, suffix):
    instances = load_instances("builtin")
    path = tmp_path / f"set.{suffix}"
    path.write_text("old\n" * 1000)
    with path.open("rb") as reader:  # opened before the rewrite, as by a concurrent load
        write_instances(instances[:2], path)
        assert reader.read() == b"old\n" * 1000  # a write in place would truncate it under the reader
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert load_instances(str(path)) == instances[:2]
    if suffix == "jsonl":
        assert path.read_text(encoding="utf-8") == "".join(
            json.dumps(i.to_record(), ensure_ascii=False) + "\n" for i in instances[:2])


def test_unavailable_hf_dataset_is_named(tmp_path):
    import os
    import subprocess
    import sys

    # A fresh interpreter: the hub's offline switch is read when `datasets` is first imported.
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path))
    code = "from raydist.tasks import load_instances\nload_instances('hf://no-such-org/no-such-set@dev')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1
    assert "RuntimeError: cannot load Hugging Face dataset 'no-such-org/no-such-set' split 'dev'" in done.stderr
