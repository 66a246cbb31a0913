"""Hostile instance files: every bad row is refused at plan time, naming file, line, instance and field.

Each case mutates one field of the first built-in instance. The loader cases run in process;
two launches (a dry run and a real launch, both refused before any unit) show the same
refusal reaches the user as one ``raydist: error:`` line with exit status 2.
"""

import json
import os
from pathlib import Path

import pytest

from raydist.tasks import Instance, MalformedInstance, instance_from_record, load_instances, write_instances
from raydist.tasks.loaders import builtin_path
from tests.launches import launch

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BASE = json.loads(builtin_path().read_text(encoding="utf-8").splitlines()[0])
ID = BASE["instance_id"]
F2P = json.loads(BASE["FAIL_TO_PASS"])
P2P = json.loads(BASE["PASS_TO_PASS"])


#: A one-hunk diff whose file header names ``old`` and ``new``.
ESCAPING = "--- {old}\n+++ {new}\n@@ -0,0 +1 @@\n+planted\n"


def write_rows(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def refusal(tmp_path: Path, **changes) -> str:
    """The message that loading a file whose line 2 is the built-in row with ``changes`` raises."""
    source = write_rows(tmp_path / "rows.jsonl", dict(BASE, instance_id="fine-1"), dict(BASE, **changes))
    with pytest.raises(MalformedInstance) as caught:
        load_instances(str(source))
    return str(caught.value)


@pytest.mark.parametrize(("changes", "field", "problem"), [
    ({"problem_statement": ""}, "problem_statement", "is blank: the agent would be given no task"),
    ({"problem_statement": " \n\t"}, "problem_statement", "is blank: the agent would be given no task"),
    ({"test_cmd": ""}, "test_cmd", "is blank; give the command that runs the tests, or leave the field out"),
    ({"test_cmd": "   "}, "test_cmd", "is blank; give the command that runs the tests, or leave the field out"),
    ({"FAIL_TO_PASS": json.dumps(F2P + F2P)}, "FAIL_TO_PASS", f"lists {F2P[0]!r} twice"),
    ({"PASS_TO_PASS": json.dumps(P2P + P2P[:1])}, "PASS_TO_PASS", f"lists {P2P[0]!r} twice"),
    ({"PASS_TO_PASS": json.dumps(P2P + F2P)}, "PASS_TO_PASS", f"lists {F2P[0]!r}, which FAIL_TO_PASS lists too"),
    ({"patch": "make humanize keep _id inside words\n"}, "patch",
     "is not a unified diff (starts 'make humanize keep _id inside words\\n')"),
    ({"patch": ""}, "patch", "is not a unified diff (starts '')"),
    ({"test_patch": "not a diff"}, "test_patch", "is not a unified diff (starts 'not a diff')"),
    ({"patch": "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1 @@\n-a\n"}, "patch",
     "is not a unified diff (starts '--- a/x.py\\n+++ b/x.py\\n@@ -1,3 +1 @@\\n-a\\n')"),
    ({"FAIL_TO_PASS": json.dumps(F2P + [""])}, "FAIL_TO_PASS", "lists a blank test id"),
    ({"PASS_TO_PASS": json.dumps([" "] + P2P)}, "PASS_TO_PASS", "lists a blank test id"),
    ({"patch": ESCAPING.format(old="a/../../../etc/passwd", new="b/../../../etc/passwd")}, "patch",
     "changes 'a/../../../etc/passwd', outside the repository (an absolute path or a '..' part)"),
    ({"patch": ESCAPING.format(old="/dev/null", new="/tmp/planted.py")}, "patch",
     "changes '/tmp/planted.py', outside the repository (an absolute path or a '..' part)"),
    ({"test_patch": "diff --git a/x.py b/../y.py\nrename from x.py\nrename to ../y.py\n"}, "test_patch",
     "changes 'b/../y.py', outside the repository (an absolute path or a '..' part)"),
])
def test_a_bad_row_is_refused_naming_file_line_instance_and_field(tmp_path, changes, field, problem):
    assert refusal(tmp_path, **changes) == (
        f"{tmp_path / 'rows.jsonl'}:2: instance {ID!r}: field {field!r} {problem}; fix or remove the line")


@pytest.mark.parametrize("instance_id", ["a\nb", "a\tb", "a\x00b", "a\x1b[31mb", "a/b", "a\\b", "..", ".",
                                         "a\u202eb", "a\u200bb", "a\x85b"])
def test_an_instance_id_that_cannot_be_a_file_name_or_one_line_is_refused(tmp_path, instance_id):
    assert refusal(tmp_path, instance_id=instance_id) == (
        f"{tmp_path / 'rows.jsonl'}:2: field 'instance_id' {instance_id!r} holds a control or format character "
        "(e.g. a right-to-left override) or a path separator, or is '.'/'..' (ids become file names and are "
        "printed on one line); fix or remove the line")


def test_a_patch_inside_the_repository_is_not_taken_for_one_that_leaves_it(tmp_path):
    # a removed line "-- x" is "--- x" inside a hunk: not a file header
    patch = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1 @@\n--- ../../x\n keep\n"
    [instance] = load_instances(str(write_rows(tmp_path / "ok.jsonl", dict(BASE, patch=patch))))
    assert instance.patch == patch


def test_a_row_nested_too_deep_to_parse_is_named_by_file_and_line(tmp_path):
    source = tmp_path / "deep.jsonl"
    source.write_text(json.dumps(BASE) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(MalformedInstance) as caught:
        load_instances(str(source))
    assert str(caught.value) == f"{source}:2: nests lists or objects too deep to parse; fix or remove the line"


def test_an_absent_test_cmd_and_an_empty_test_patch_are_allowed(tmp_path):
    # SWE-bench rows carry no test_cmd; fresh tasks ship their tests with the release (test_patch "").
    row = {k: v for k, v in BASE.items() if k != "test_cmd"} | {"test_patch": ""}
    [instance] = load_instances(str(write_rows(tmp_path / "ok.jsonl", row)))
    assert (instance.test_cmd, instance.test_patch) == ("", "")


def test_a_line_that_is_not_utf8_is_named_by_file_and_line(tmp_path):
    source = tmp_path / "latin1.jsonl"
    source.write_bytes((json.dumps(BASE) + "\n").encode() + '{"instance_id": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(MalformedInstance) as caught:
        load_instances(str(source))
    assert str(caught.value) == (f"{source}:2: is not UTF-8 text (byte b'\\xe9' at column 21); "
                                 "save the file as UTF-8")


def test_a_json_file_that_is_not_utf8_is_named_by_file_and_line(tmp_path):
    source = tmp_path / "latin1.json"
    source.write_bytes(b'[\n{"instance_id": "caf\xe9"}\n]\n')
    with pytest.raises(MalformedInstance) as caught:
        load_instances(str(source))
    assert str(caught.value) == f"{source}:2: is not UTF-8 text (byte b'\\xe9'); save the file as UTF-8"


@pytest.mark.parametrize(("name", "remedy"), [("s.jsonl", "fix or remove the line"),
                                              ("s.json", "fix or remove that record")])
def test_a_lone_surrogate_escape_is_named_by_file_line_instance_and_field(tmp_path, name, remedy):
    bad = json.dumps(dict(BASE, instance_id="sur-1")).replace('"problem_statement": "',
                                                              '"problem_statement": "\\udc80', 1)
    text = json.dumps(BASE) + "\n" + bad + "\n"
    source = tmp_path / name
    source.write_text(text if name.endswith(".jsonl") else "[" + text.replace("\n", ",\n", 1) + "]")
    with pytest.raises(MalformedInstance) as caught:
        load_instances(str(source))
    assert str(caught.value) == (f"{source}:2: instance 'sur-1': field 'problem_statement' holds a lone "
                                 f"surrogate (an escape such as \\udc80), which is not text; {remedy}")


def test_a_directory_as_the_source_is_named_a_directory(tmp_path):
    (tmp_path / "rows.jsonl").mkdir()
    with pytest.raises(ValueError) as caught:
        load_instances(str(tmp_path / "rows.jsonl"))
    assert str(caught.value) == (f"instance file '{tmp_path / 'rows.jsonl'}' is a directory, not a file of "
                                 "instances; point benchmark.source at a .jsonl/.json/.parquet file")


def test_a_truncated_parquet_file_is_named_as_unreadable(tmp_path):
    source = tmp_path / "rows.parquet"
    write_instances(load_instances("builtin", limit=1), source)
    source.write_bytes(source.read_bytes()[:100])
    with pytest.raises(MalformedInstance) as caught:
        load_instances(str(source))
    assert str(caught.value).startswith(f"{source}: is not a readable Parquet table (")
    assert str(caught.value).endswith("); write it again, e.g. with raydist.tasks.write_instances")


def test_an_instance_cannot_hold_a_repeated_test_id_so_grading_never_counts_one_of_two():
    fields = {k: BASE[k] for k in ("instance_id", "repo", "base_commit", "patch", "test_patch",
                                   "problem_statement", "version", "test_cmd")}
    with pytest.raises(ValueError) as caught:
        Instance(**fields, FAIL_TO_PASS=(F2P[0], F2P[0]), PASS_TO_PASS=(), recipe=None)
    assert str(caught.value) == f"instance {ID!r}: FAIL_TO_PASS lists {F2P[0]!r} twice"


def test_every_builtin_instance_still_loads():
    assert len(load_instances("builtin")) == 6
    for row in map(json.loads, builtin_path().read_text(encoding="utf-8").splitlines()):
        assert instance_from_record(row, "builtin").instance_id == row["instance_id"]


@pytest.mark.shared_data
@pytest.mark.parametrize(("name", "count"), [("tasks/realfix.jsonl", 6), ("swebench/offline.jsonl", 3),
                                             ("swebench/swebench_lite.jsonl", 300),
                                             ("swebench/swebench_verified_50.jsonl", 50)])
def test_every_shipped_instance_file_still_loads(name, count):
    if not (DATA / name).is_file():
        pytest.skip(f"{DATA / name} (shared reference data) is absent")
    assert len(load_instances(str(DATA / name))) == count


def test_plan_dry_run_refuses_a_bad_row_in_one_line_with_exit_2(tmp_path):
    source = write_rows(tmp_path / "rows.jsonl", dict(BASE, problem_statement=""))
    res = launch(tmp_path / "out", "dry_run=true", "benchmark=file", f"benchmark.source={source}", "agent=oracle")
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        f"raydist: error: benchmark=file: {source}:1: instance {ID!r}: field 'problem_statement' is blank: "
        "the agent would be given no task; fix or remove the line"]


def test_a_launch_refuses_a_bad_row_and_a_fifo_source_before_any_unit_runs(tmp_path):
    source = write_rows(tmp_path / "rows.jsonl", dict(BASE, FAIL_TO_PASS=json.dumps(F2P + F2P)))
    res = launch(tmp_path / "out", "benchmark=file", f"benchmark.source={source}", "agent=oracle",
                 "levels=[L0]", "seeds=[0]", timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        f"raydist: error: benchmark=file: {source}:1: instance {ID!r}: field 'FAIL_TO_PASS' lists {F2P[0]!r} "
        "twice; fix or remove the line"]
    assert not (tmp_path / "out").exists()  # refused before Hydra made a directory: no .hydra/, no launch.log
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # opened before a stat, it would block the launch until the timeout
    res = launch(tmp_path / "out", "dry_run=true", "benchmark=file", f"benchmark.source={fifo}", timeout=60)
    assert (res.returncode, res.stderr.strip().splitlines()) == (2, [
        f"raydist: error: benchmark=file: instance file '{fifo}' is a FIFO (named pipe), not a file of "
        "instances; point benchmark.source at a .jsonl/.json/.parquet file"])
