"""Grading with SWE-bench semantics: real instances, real images, real test suites."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from raydist.grading import apply_patch, grade, is_resolved, parse_test_log
from raydist.grading.test_files import restore_command, touched_files
from raydist.sandbox import Sandbox, base_image_tag, ensure_instance_image
from raydist.tasks import load_instances

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} (shared reference data) is absent")
CACHE = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
TOOLZ = "pytoolz__toolz-5a7e078"
NEW_FILE_DIFF = ("diff --git a/tests/new_test.py b/tests/new_test.py\nnew file mode 100644\n"
                 "--- /dev/null\n+++ b/tests/new_test.py\n@@ -0,0 +1 @@\n+x = 1\n"
                 "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n"
                 "@@ -1 +1 @@\n-a\n+b\n")


# -- pure pieces --------------------------------------------------------------------------

def test_touched_files_lists_modified_and_created_paths():
    assert touched_files(NEW_FILE_DIFF) == ["tests/new_test.py", "src/m.py"]
    assert touched_files("") == []


def test_touched_files_rejects_text_that_is_not_a_diff():
    with pytest.raises(ValueError, match="test_patch is not a unified diff"):
        touched_files("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-only one line\n")


def test_restore_command_checks_out_or_deletes_each_path():
    assert restore_command(["a b.py"]) == (
        "if git cat-file -e HEAD:'a b.py' 2>/dev/null; then git checkout HEAD -- 'a b.py'; "
        "else rm -rf -- 'a b.py'; fi")


def test_log_parser_takes_the_second_token_as_test_id():
    log = ("PASSED tests/t.py::test_a\nFAILED tests/t.py::test_b - AssertionError: x\n"
           "SKIPPED [1] tests/t.py:9: no reason\nXFAIL tests/t.py::test_c - flaky\n"
           "PASSED tests/t.py::test_d[a b]\n")
    assert parse_test_log(log) == {"tests/t.py::test_a": "PASSED", "tests/t.py::test_b": "FAILED",
                                   "tests/t.py::test_c": "XFAIL", "tests/t.py::test_d[a": "PASSED"}


def test_resolved_needs_every_listed_test_passing():
    statuses = {"f": "PASSED", "p": "PASSED", "s": "SKIPPED", "x": "FAILED"}
    assert is_resolved(statuses, ["f"], ["p", "s"]) is True  # a skipped P2P is no regression
    assert is_resolved(statuses, ["f", "x"], ["p"]) is False
    assert is_resolved(statuses, ["f"], ["p", "absent"]) is False
    assert is_resolved(statuses, ["s"], []) is False  # a skipped F2P is not a fix


# -- in containers ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def toolz(client):
    if not DATA.is_dir():
        pytest.skip(f"{DATA} (shared reference data) is absent")
    instance = load_instances(str(DATA / "tasks" / "realfix.jsonl"), ids=[TOOLZ])[0]
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=TOOLZ)
    return instance, image


@pytest.mark.docker
def test_patch_falls_back_to_fuzzy_patch(client):
    original = "".join(f"line {i}\n" for i in range(1, 8))
    # The context line "line 2" is wrong: git apply refuses it, `patch --fuzz` accepts it.
    diff = ("--- a/f.txt\n+++ b/f.txt\n@@ -1,7 +1,7 @@\n line 1\n line TWO\n line 3\n-line 4\n"
            "+line four\n line 5\n line 6\n line 7\n")
    with Sandbox.create(client, base_image_tag(), name="apply") as box:
        box.write_files({"f.txt": original})
        result = apply_patch(box, diff, label="model")
        assert (result.applied, result.method) == (True, "patch")
        assert box.read_files(["f.txt"])["f.txt"] == original.replace("line 4", "line four").encode()


@pytest.mark.docker
def test_gold_patch_resolves_with_every_test_passing(client, toolz):
    instance, image = toolz
    result = grade(client, instance, image.tag, instance.patch, timeout=300)
    assert (result.resolved, result.applied, result.apply_method, result.error) == (True, True, "git-apply", None)
    assert result.fail_to_pass == {"toolz/tests/test_itertoolz.py::test_partition_all": "PASSED"}
    assert set(result.pass_to_pass.values()) == {"PASSED"}
    assert len(result.pass_to_pass) == len(instance.PASS_TO_PASS) == 49


@pytest.mark.docker
def test_empty_patch_is_not_resolved(client, toolz):
    instance, image = toolz
    result = grade(client, instance, image.tag, "", timeout=300)
    assert (result.resolved, result.applied, result.apply_method, result.error) == (False, True, "empty", None)
    assert result.fail_to_pass == {"toolz/tests/test_itertoolz.py::test_partition_all": "FAILED"}
    assert set(result.pass_to_pass.values()) == {"PASSED"}


@pytest.mark.docker
def test_garbage_patch_is_recorded_not_raised(client, toolz):
    instance, image = toolz
    garbage = "--- a/toolz/nope.py\n+++ b/toolz/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    result = grade(client, instance, image.tag, garbage, timeout=300)
    assert (result.resolved, result.applied, result.apply_method, result.tests) == (False, False, "none", {})
    assert result.error.startswith(f"patch does not apply: {TOOLZ}: ")
    assert set(result.fail_to_pass.values()) == {"MISSING"}


@pytest.mark.docker
def test_model_edits_to_test_files_are_reset_before_the_test_patch(client, toolz):
    instance, image = toolz
    added = ("--- a/toolz/tests/test_itertoolz.py\n+++ b/toolz/tests/test_itertoolz.py\n"
             "@@ -1,2 +1,4 @@\n+def test_added_by_model():\n+    pass\n")
    with Sandbox.create(client, image.tag, name="peek") as box:
        head = box.read_files(["toolz/tests/test_itertoolz.py"])["toolz/tests/test_itertoolz.py"]
    first_two = "".join(" " + line for line in head.decode().splitlines(keepends=True)[:2])
    result = grade(client, instance, image.tag, added + first_two, timeout=300)
    assert result.applied is True
    assert "toolz/tests/test_itertoolz.py::test_added_by_model" not in result.tests
    assert result.resolved is False


@pytest.mark.docker
def test_test_timeout_is_an_error_not_a_resolution(client, toolz):
    instance, image = toolz
    slow = dataclasses.replace(instance, test_cmd="sleep 60")
    result = grade(client, slow, image.tag, instance.patch, timeout=2)
    assert (result.resolved, result.applied, result.error) == (False, True, f"{TOOLZ}: tests timed out after 2s")


@pytest.mark.docker
@needs_data
@pytest.mark.parametrize("patch_kind, resolved", [("gold", True), ("empty", False)])
def test_flask_swebench_instance_grades_like_swebench(client, patch_kind, resolved):
    instance = load_instances(str(DATA / "swebench" / "offline.jsonl"), ids=["pallets__flask-4992"])[0]
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id)
    patch = instance.patch if patch_kind == "gold" else ""
    result = grade(client, instance, image.tag, patch, timeout=300)
    assert result.resolved is resolved
    assert result.fail_to_pass == {"tests/test_config.py::test_config_from_file_toml":
                                   "PASSED" if resolved else "FAILED"}
    assert set(result.pass_to_pass.values()) == {"PASSED"}
