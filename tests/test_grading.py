"""Grading with SWE-bench semantics: real instances, real images, real test suites."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from raydist.grading import apply_patch, grade, is_resolved, parse_test_log
from raydist.grading.infra import infra_changes
from raydist.grading.junit import check_report, is_pytest_command, junit_key, parse_junit
from raydist.grading.test_files import restore_command, touched_files
from raydist.sandbox import as_provider, base_image_tag, ensure_instance_image
from raydist.tasks import load_instances
from raydist.views import RepoFiles, recover_patch

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
    with as_provider(client).create(base_image_tag(), name="apply") as box:
        box.write_files({"f.txt": original})
        result = apply_patch(box, diff, label="model")
        assert (result.applied, result.method) == (True, "patch-fuzz")
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
    assert result.error_cause == "patch_does_not_apply"
    assert set(result.fail_to_pass.values()) == {"MISSING"}


@pytest.mark.docker
def test_model_edits_to_test_files_are_reset_before_the_test_patch(client, toolz):
    instance, image = toolz
    added = ("--- a/toolz/tests/test_itertoolz.py\n+++ b/toolz/tests/test_itertoolz.py\n"
             "@@ -1,2 +1,4 @@\n+def test_added_by_model():\n+    pass\n")
    with as_provider(client).create(image.tag, name="peek") as box:
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


# -- junit channel: pure pieces -----------------------------------------------------------

def test_only_one_plain_pytest_call_gets_the_junit_channel():
    assert is_pytest_command('python -m pytest -rA -p no:cacheprovider -o addopts="" tests/test_core.py')
    assert is_pytest_command("PYTHONWARNINGS=ignore pytest -rA t.py")
    assert is_pytest_command("/opt/venv/bin/python3.11 -m pytest t.py")
    assert not is_pytest_command("./tests/runtests.py --verbosity 2 admin_views")
    assert not is_pytest_command("pytest t.py; echo done")
    assert not is_pytest_command("tox -e py311")


def test_junit_key_is_pytests_mangled_address():
    assert junit_key("tests/test_core.py::TestX::test_y[a/b c]") == "tests.test_core.TestX::test_y[a/b c]"
    assert junit_key("test_six.py::test_z") == "test_six::test_z"


XML = (b'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
       b'failures="1" skipped="1" tests="3"><testcase classname="t" name="test_a"/>'
       b'<testcase classname="t" name="test_b"><failure message="x"/></testcase>'
       b'<testcase classname="t" name="test_c"><skipped type="pytest.xfail" message="r"/></testcase>'
       b'</testsuite></testsuites>')


def test_junit_statuses_and_their_consistency_with_the_exit_status():
    report = parse_junit(XML)
    assert report.statuses == {"t::test_a": "PASSED", "t::test_b": "FAILED", "t::test_c": "XFAIL"}
    assert check_report(report, 1, ["t.py::test_a"]) is None
    assert check_report(report, 0, ["t.py::test_a"]) == (
        "pytest exit status 0 disagrees with its junit report (1 failed)")
    assert check_report(report, 2, []) == "pytest exit status 2 disagrees with its junit report (1 failed)"


def test_a_second_document_or_a_forged_counter_is_rejected():
    assert parse_junit(XML + XML).problem.startswith("the junit report is not one XML document")
    assert parse_junit(b"").problem == "pytest wrote no junit report"
    forged = parse_junit(XML.replace(b'tests="3"', b'tests="2"'))
    assert forged.problem == ("junit counters {'tests': '2', 'failures': '1', 'errors': '0', 'skipped': '1'} "
                              "disagree with its testcases {'tests': 3, 'failures': 1, 'errors': 0, 'skipped': 1}")


def test_a_wanted_id_reported_twice_is_rejected():
    twice = XML.replace(b'tests="3"', b'tests="4"').replace(
        b"</testsuite>", b'<testcase classname="t" name="test_a"/></testsuite>')
    assert check_report(parse_junit(twice), 1, ["t.py::test_a"]) == "tests reported more than once: t.py::test_a"


def test_test_infrastructure_changes_are_named():
    assert infra_changes({"tests/conftest.py": (None, "x"), "pkg/mod.py": ("a", "b"),
                          "setup.cfg": ("[metadata]\nname=a\n", "[metadata]\nname=b\n"),
                          "tox.ini": ("[pytest]\naddopts=-x\n", "[pytest]\naddopts=-p no:junitxml\n"),
                          "pyproject.toml": ("[tool.pytest.ini_options]\na=1\n", "[tool.pytest.ini_options]\na=2\n"),
                          "pytest.py": (None, "")}) == ["pyproject.toml", "pytest.py", "tests/conftest.py", "tox.ini"]


# -- forgeries on a real instance -----------------------------------------------------------

WCWIDTH = "jquast__wcwidth-del-control"
_IDS = [t for i in load_instances("builtin", ids=[WCWIDTH]) for t in (*i.FAIL_TO_PASS, *i.PASS_TO_PASS)]
F2P_LINE = "\n".join(f"PASSED {t}" for t in _IDS)
# Each forgery leaves the defect in place and tries to make its F2P test look passed; each
# also prints the PASSED lines SWE-bench's log parser would believe (the last line for an id
# wins), so that every one of them resolves the instance when graded from the log.
_JUNIT_FROM_CMDLINE = (
    "def _junit_path():\n"
    "    args = open('/proc/self/cmdline', 'rb').read().decode().split('\\0')\n"
    "    return next(a.split('=', 1)[1] for a in args if a.startswith('--junitxml='))\n")
_FAKE_XML = ("'<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\" errors=\"0\" failures=\"0\" "
             "skipped=\"0\" tests=\"1\"><testcase classname=\"tests.test_core\" "
             "name=\"test_delete_is_a_control_character\"/></testsuite></testsuites>'")
FORGERIES = {
    "atexit_prints_passed": f"import atexit\natexit.register(lambda: print({F2P_LINE!r}))\n",
    "atexit_prints_then_exits_0": (f"import atexit, os\n"
                                   f"atexit.register(lambda: (print({F2P_LINE!r}, flush=True), os._exit(0)))\n"),
    "exits_0_at_import": f"import os\nprint({F2P_LINE!r}, flush=True)\nos._exit(0)\n",
    "atexit_rewrites_the_junit_file": (
        _JUNIT_FROM_CMDLINE + "import atexit\n"
        f"def _forge():\n    print({F2P_LINE!r})\n    open(_junit_path(), 'w').write({_FAKE_XML})\n"
        "atexit.register(_forge)\n"),
    "atexit_deletes_the_junit_file": (
        _JUNIT_FROM_CMDLINE + "import atexit, os\n"
        f"def _forge():\n    print({F2P_LINE!r})\n    try:\n        os.remove(_junit_path())\n"
        "    except OSError:\n        pass\n    os._exit(0)\natexit.register(_forge)\n"),
    "writes_a_report_first_and_exits_0": (
        _JUNIT_FROM_CMDLINE + "import atexit, os\n"
        f"open(_junit_path(), 'w').write({_FAKE_XML})\n"
        f"atexit.register(lambda: (print({F2P_LINE!r}, flush=True), os._exit(0)))\n"),
}
CONFTEST_FORGERIES = {
    "conftest_rewrites_reports": (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"),
    "conftest_exits_0_early": (
        "import os\n\ndef pytest_sessionfinish(session, exitstatus):\n"
        "    reporter = session.config.pluginmanager.get_plugin('terminalreporter')\n"
        f"    reporter.write_line({F2P_LINE!r})\n    reporter.flush()\n    os._exit(0)\n"),
}


@pytest.fixture(scope="module")
def wcwidth(client):
    instance = load_instances("builtin", ids=[WCWIDTH])[0]
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=WCWIDTH)
    return instance, image, RepoFiles(image.repo_dir)


@pytest.mark.docker
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_patch_that_forges_test_results_stays_unresolved(client, wcwidth, forgery):
    instance, image, repo = wcwidth
    path = "wcwidth/wcwidth.py"
    patch = recover_patch({path: repo.read(path)}, {path: repo.read(path) + "\n" + FORGERIES[forgery]})
    result = grade(client, instance, image.tag, patch, timeout=120)
    assert (result.resolved, result.applied, result.grading_channel) == (False, True, "junit")
    if result.error is None:  # the forgery did not even disturb the report: the real outcome stands
        assert result.fail_to_pass == {"tests/test_core.py::test_delete_is_a_control_character": "FAILED"}
    else:
        assert result.error_cause == "junit_rejected"


@pytest.mark.docker
@pytest.mark.parametrize("forgery", sorted(CONFTEST_FORGERIES))
def test_a_conftest_that_forges_results_is_put_back_and_named(client, wcwidth, forgery):
    instance, image, _ = wcwidth
    patch = recover_patch({}, {"tests/conftest.py": CONFTEST_FORGERIES[forgery]})
    result = grade(client, instance, image.tag, patch, timeout=120)
    assert (result.resolved, result.error, result.test_infra_changed) == (False, None, ("tests/conftest.py",))
    assert result.fail_to_pass == {"tests/test_core.py::test_delete_is_a_control_character": "FAILED"}
    assert set(result.pass_to_pass.values()) == {"PASSED"}


@pytest.mark.docker
def test_gold_patch_resolves_through_the_junit_channel(client, wcwidth):
    instance, image, _ = wcwidth
    result = grade(client, instance, image.tag, instance.patch, timeout=120)
    assert (result.resolved, result.error, result.grading_channel, result.apply_method) == (
        True, None, "junit", "git-apply")
    assert (result.missing, result.error_cause, result.test_infra_changed) == (0, None, ())
    assert result.tests["tests/test_core.py::test_delete_is_a_control_character"] == "PASSED"
    assert len(result.tests) == 18
    assert len(result.pass_to_pass) == 17 and set(result.pass_to_pass.values()) == {"PASSED"}


@pytest.mark.docker
def test_an_id_the_run_does_not_report_is_missing_and_never_passes(client, wcwidth):
    instance, image, _ = wcwidth
    ghost = "tests/test_core.py::test_that_does_not_exist"
    extended = dataclasses.replace(instance, PASS_TO_PASS=type(instance.PASS_TO_PASS)([*instance.PASS_TO_PASS, ghost]))
    result = grade(client, extended, image.tag, instance.patch, timeout=120)
    assert (result.resolved, result.error, result.missing, result.pass_to_pass[ghost]) == (False, None, 1, "MISSING")
    assert result.fail_to_pass == {"tests/test_core.py::test_delete_is_a_control_character": "PASSED"}
    assert sum(s == "PASSED" for s in result.pass_to_pass.values()) == 17


@pytest.mark.docker
def test_a_test_command_that_is_not_one_pytest_call_is_graded_from_its_log(client, wcwidth):
    instance, image, _ = wcwidth
    chained = dataclasses.replace(instance, test_cmd=instance.test_cmd + " && true")
    result = grade(client, chained, image.tag, instance.patch, timeout=120)
    assert (result.resolved, result.grading_channel) == (True, "log")


@pytest.mark.docker
def test_gold_patch_that_needs_fuzz_is_applied_and_graded(client, wcwidth):
    instance, image, _ = wcwidth
    # One context line of the gold hunk no longer matches the base: git apply refuses it
    # (and --3way has no blobs to merge from), `patch --fuzz=5` applies it, as in SWE-bench.
    fuzzy = instance.patch.replace("     # C0/C1 control characters", "     # C0/C1 control chars")
    assert fuzzy != instance.patch
    result = grade(client, instance, image.tag, fuzzy, timeout=120)
    assert (result.resolved, result.applied, result.apply_method, result.error) == (True, True, "patch-fuzz", None)
