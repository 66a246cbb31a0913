"""The reporting guard: its plugin run by the real pytest on a small repository, its record's
cross-check with the junit XML, and the test-infrastructure rules that go with it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raydist.grading.guard import GuardRecord, check_guard, guard_module, guard_source, guard_statuses, parse_guard
from raydist.grading.infra import infra_changes, infra_kind, is_packaging, packaging_changes
from raydist.grading.junit import parse_junit

TESTS = ("import pytest\nimport pkg\n\ndef test_ok():\n    assert pkg.X == 1\n\n"
         "def test_bad():\n    assert pkg.X == 2\n\n"
         "@pytest.mark.xfail\ndef test_xf():\n    assert 0\n\ndef test_skip():\n    pytest.skip('no')\n\n"
         "@pytest.mark.parametrize('v', ['a/b', 'c d'])\ndef test_p(v):\n    pass\n\n"
         "import unittest\n\nclass T(unittest.TestCase):\n    def test_u_ok(self):\n        pass\n\n"
         "    def test_u_bad(self):\n        self.assertEqual(1, 2)\n")
CLEAN_RECORD = {
    "tests.test_a::test_ok": {"setup": "passed", "call": "passed", "teardown": "passed"},
    "tests.test_a::test_bad": {"setup": "passed", "call": "raised", "teardown": "passed"},
    "tests.test_a::test_xf": {"setup": "passed", "call": "xfailed", "teardown": "passed"},
    "tests.test_a::test_skip": {"setup": "passed", "call": "skipped", "teardown": "passed"},
    "tests.test_a::test_p[a/b]": {"setup": "passed", "call": "passed", "teardown": "passed"},
    "tests.test_a::test_p[c d]": {"setup": "passed", "call": "passed", "teardown": "passed"},
    "tests.test_a.T::test_u_ok": {"setup": "passed", "call": "passed", "teardown": "passed"},
    "tests.test_a.T::test_u_bad": {"setup": "passed", "call": "raised", "teardown": "passed"},
}
# Package code that rewrites pytest's reporting when the tests import it.
ATTACKS = {
    "report_classmethod": (
        "import _pytest.reports as _r\n_orig = _r.TestReport.from_item_and_call.__func__\n"
        "def _fake(cls, item, call):\n    rep = _orig(cls, item, call)\n"
        "    if rep.outcome == 'failed':\n        rep.outcome = 'passed'; rep.longrepr = None\n    return rep\n"
        "_r.TestReport.from_item_and_call = classmethod(_fake)\n"),
    "runner_function": (
        "import _pytest.runner as _run\n_orig = _run.call_and_report\n"
        "def _fake(item, when, log=True, **kw):\n    rep = _orig(item, when, log=False, **kw)\n"
        "    rep.outcome = 'passed'; rep.longrepr = None\n"
        "    if log:\n        item.ihook.pytest_runtest_logreport(report=rep)\n    return rep\n"
        "_run.call_and_report = _fake\n"),
    "junit_writer_method": (
        "import _pytest.junitxml as _j\n_j._NodeReporter.append_failure = lambda self, report: None\n"),
    "registered_hookwrapper": (
        "import gc, pytest\nfrom _pytest.config import Config\n\nclass _F:\n"
        "    @pytest.hookimpl(hookwrapper=True)\n    def pytest_runtest_makereport(self, item, call):\n"
        "        out = yield\n        out.get_result().outcome = 'passed'\n\n"
        "for _c in [o for o in gc.get_objects() if isinstance(o, Config)]:\n    _c.pluginmanager.register(_F())\n"),
}


def run_guarded(tmp_path: Path, package: str, files: dict[str, str] | None = None, plugins: tuple[str, ...] = ()):
    """Run the real pytest on a small repository with the guard loaded; (junit XML, record)."""
    repo, guard = tmp_path / "repo", tmp_path / "guard"
    for rel, text in {"pkg/__init__.py": "X = 1\n" + package, "tests/test_a.py": TESTS, **(files or {})}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    guard.mkdir()
    (guard / f"{guard_module('t')}.py").write_text(guard_source(str(tmp_path / "record.json"), repo=str(repo)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {"PYTHONPATH": str(guard)}
    args = [arg for p in ("no:cacheprovider", *plugins, guard_module("t")) for arg in ("-p", p)]
    subprocess.run([sys.executable, "-m", "pytest", "-q", *args, f"--junitxml={tmp_path / 'r.xml'}",
                    "-o", "junit_family=xunit2", "tests"], cwd=repo, env=env, capture_output=True, timeout=120,
                   check=False)
    return (tmp_path / "r.xml").read_bytes(), (tmp_path / "record.json").read_bytes()


def test_the_guard_records_each_phase_of_an_honest_run_and_agrees_with_the_xml(tmp_path):
    xml, data = run_guarded(tmp_path, "")
    record = parse_guard(data)
    assert (record.tests, record.tampered, record.problem) == (CLEAN_RECORD, (), None)
    assert check_guard(parse_junit(xml).statuses, record) is None


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_package_code_that_rewrites_pytests_reporting_is_caught(tmp_path, attack):
    xml, data = run_guarded(tmp_path, ATTACKS[attack])
    report, record = parse_junit(xml), parse_guard(data)
    assert report.statuses["tests.test_a::test_bad"] == "PASSED"  # the forgery works on the XML ...
    assert record.tests["tests.test_a::test_bad"]["call"] == "raised"  # ... not on the guard's record
    source = tmp_path / "repo" / "pkg" / "__init__.py"
    first = {
        "report_classmethod": f"collection: _pytest.reports.TestReport.from_item_and_call replaced by code of {source}",
        "runner_function": f"collection: _pytest.runner.call_and_report replaced by code of {source}",
        "junit_writer_method": (
            f"collection: _pytest.junitxml._NodeReporter.append_failure replaced by code of {source}"),
    }
    if attack == "registered_hookwrapper":
        assert record.tampered[0].startswith("a pytest plugin (<pkg._F object at 0x")
        assert record.tampered[0].endswith(f") was registered by {source}:12")
    else:
        assert record.tampered[0] == first[attack]
    assert check_guard(report.statuses, record).startswith(
        "pytest's reporting was tampered with: " + record.tampered[0])


def test_package_code_a_conftest_imports_is_caught_before_configure_ends(tmp_path):
    _, data = run_guarded(tmp_path, ATTACKS["runner_function"], {"tests/conftest.py": "import pkg  # noqa\n"})
    assert parse_guard(data).tampered[0] == (
        f"configure: _pytest.runner.call_and_report replaced by code of {tmp_path / 'repo' / 'pkg' / '__init__.py'}")


def test_a_plugin_of_the_repository_declared_by_a_test_module_is_caught(tmp_path):
    forger = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
              "    out = yield\n    out.get_result().outcome = 'passed'\n")
    _, data = run_guarded(tmp_path, "", {"tests/forger.py": forger,
                                         "tests/test_b.py": "pytest_plugins = ['tests.forger']\n"})
    repo = tmp_path / "repo"
    assert parse_guard(data).tampered == (
        f"a pytest plugin of the repository ({repo / 'tests' / 'forger.py'}) was declared by "
        f"{repo / 'tests' / 'test_b.py'}",)


def test_a_wrapper_that_clears_the_exception_before_the_report_is_made_is_seen(tmp_path):
    # A conftest is put back before grading; here it stands for any plugin the guard trusts.
    clears = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
              "    call.excinfo = None\n    yield\n")
    xml, data = run_guarded(tmp_path, "", {"tests/conftest.py": clears})
    report, record = parse_junit(xml), parse_guard(data)
    assert (report.statuses["tests.test_a::test_bad"], record.tampered) == ("PASSED", ())
    assert check_guard(report.statuses, record) == (
        "the junit report says tests.test_a::test_bad PASSED but the guard saw "
        "{'setup': 'passed', 'call': 'raised', 'teardown': 'passed'}")


def test_an_installed_plugin_that_patches_pytest_is_not_tampering(tmp_path):
    # As pytest-subtests adds TestCaseFunction.addSubTest at configure: code outside the repository.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "subtests_like.py").write_text(
        "import _pytest.unittest as u\n\ndef pytest_configure(config):\n"
        "    u.TestCaseFunction.addSubTest = lambda self, *a: None\n")
    conftest = f"import sys\nsys.path.insert(0, {str(tmp_path / 'site')!r})\npytest_plugins = ['subtests_like']\n"
    xml, data = run_guarded(tmp_path, "", {"tests/conftest.py": conftest})
    assert parse_guard(data).tampered == ()
    assert check_guard(parse_junit(xml).statuses, parse_guard(data)) is None


# -- the cross-check on its own ---------------------------------------------------------------

def _record(**tests) -> GuardRecord:
    return GuardRecord({k.replace("__", "::"): v for k, v in tests.items()}, (), None)


PASSED = {"setup": "passed", "call": "passed", "teardown": "passed"}


def test_a_missing_or_doubled_record_is_refused():
    assert parse_guard(b"").problem == ("the reporting guard wrote no record (pytest did not reach unconfigure, "
                                        "or the guard plugin was unregistered)")
    doubled = parse_guard(json.dumps({"tests": {}, "tampered": []}).encode() * 2)
    assert doubled.problem == ("the reporting guard's record is not one well-formed document "
                               "(Extra data: line 1 column 30 (char 29))")
    assert check_guard({}, doubled) == doubled.problem


def test_a_passed_testcase_the_guard_saw_raise_is_refused():
    record = _record(t__a={**PASSED, "call": "raised"})
    assert check_guard({"t::a": "PASSED"}, record) == (
        "the junit report says t::a PASSED but the guard saw "
        "{'setup': 'passed', 'call': 'raised', 'teardown': 'passed'}")
    assert check_guard({"t::a": "FAILED"}, record) is None


def test_a_testcase_the_guard_never_saw_cannot_pass_or_xfail_but_may_skip_at_collection():
    assert check_guard({"t::a": "PASSED"}, _record()) == (
        "the junit report says t::a PASSED but the guard saw no run of it")
    assert check_guard({"t::a": "XFAIL"}, _record()) == (
        "the junit report says t::a XFAIL but the guard saw no run of it")
    assert check_guard({"t::a": "SKIPPED"}, _record()) is None
    assert check_guard({"t::a": "SKIPPED"}, _record(t__a=PASSED)) == (
        "the junit report says t::a SKIPPED but the guard saw "
        "{'setup': 'passed', 'call': 'passed', 'teardown': 'passed'}")


def test_a_test_that_ran_but_is_absent_from_the_xml_is_refused():
    assert check_guard({}, _record(t__a=PASSED)) == "tests that ran are missing from the junit report: t::a"


def test_the_guards_own_statuses_grade_a_forged_run():
    assert guard_statuses(_record(t__a={**PASSED, "call": "raised"}, t__b={**PASSED, "setup": "raised"},
                                  t__c={**PASSED, "call": "xfailed"}, t__d=PASSED)) == {
        "t::a": "FAILED", "t::b": "ERROR", "t::c": "XFAIL", "t::d": "PASSED"}


# -- test infrastructure at any depth, packaging metadata ----------------------------------------

def test_pytest_configuration_files_count_at_any_depth():
    assert [infra_kind(p) for p in ("tests/tox.ini", "a/b/setup.cfg", "sub/pyproject.toml", "x/pytest.ini",
                                    "deep/er/conftest.py", "src/pkg/mod.py")] == [
        "section", "section", "section", "always", "always", None]
    assert infra_changes({"tests/tox.ini": ("[tox]\n", "[tox]\n[pytest]\naddopts = -p no:junitxml\n"),
                          "docs/setup.cfg": ("[metadata]\nname=a\n", "[metadata]\nname=b\n")}) == ["tests/tox.ini"]


def test_packaging_metadata_is_named_and_compared_with_the_tree_before_the_patch():
    assert [is_packaging(p) for p in ("evil-1.0.dist-info/entry_points.txt", "pkg.egg-info", "src/x.egg-info/PKG-INFO",
                                      "a.pth", "lib/a.egg-link", "sub/entry_points.txt", "pkg/info.py")] == [
        True, True, True, True, True, True, False]
    before = {"w.egg-info": "dir", "w.egg-info/PKG-INFO": "aa", "w.egg-info/entry_points.txt": "bb"}
    after = {**before, "w.egg-info/entry_points.txt": "cc", "e-1.dist-info": "dir", "e-1.dist-info/METADATA": "dd"}
    assert packaging_changes(before, after) == ["e-1.dist-info", "e-1.dist-info/METADATA",
                                                "w.egg-info/entry_points.txt"]
    assert packaging_changes(before, dict(before)) == []
