"""Adversarial patches that rewrite pytest's reports in process: before the reporting guard and
the packaging-metadata rule, each of them made an unresolved instance grade as resolved."""
from __future__ import annotations

import pytest

from raydist.grading import grade
from raydist.views import recover_patch
from tests.test_grading import WCWIDTH, wcwidth  # noqa: F401  (fixture)

F2P = "tests/test_core.py::test_delete_is_a_control_character"
# Rewrites every failed report to passed inside the pytest process: junit XML, exit status
# and counters all agree, so every check of raydist.grading.junit passes.
FORGE = ("import _pytest.reports as _r\n_orig = _r.TestReport.from_item_and_call.__func__\n"
         "def _fake(cls, item, call):\n    rep = _orig(cls, item, call)\n"
         "    if rep.outcome == 'failed':\n        rep.outcome = 'passed'; rep.longrepr = None\n    return rep\n"
         "_r.TestReport.from_item_and_call = classmethod(_fake)\n")
# The same forgery through pytest's hooks: a plugin object registered from package code.
HOOK = ("import gc, pytest\nfrom _pytest.config import Config\n\nclass _F:\n"
        "    @pytest.hookimpl(hookwrapper=True)\n    def pytest_runtest_makereport(self, item, call):\n"
        "        out = yield\n        out.get_result().outcome = 'passed'\n\n"
        "for _c in [o for o in gc.get_objects() if isinstance(o, Config)]:\n    _c.pluginmanager.register(_F())\n")
INIT = "wcwidth/__init__.py"


def _in_init(repo, code):
    body = "\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except ImportError:\n    pass\n"
    return recover_patch({INIT: repo.read(INIT)}, {INIT: repo.read(INIT) + body}), repo.read(INIT).count("\n")


@pytest.mark.docker
def test_a_package_init_that_monkeypatches_pytests_reports_is_caught_by_the_guard(client, wcwidth):  # noqa: F811
    instance, image, repo = wcwidth
    patch, _ = _in_init(repo, FORGE)
    result = grade(client, instance, image.tag, patch, timeout=120)
    replaced = "_pytest.reports.TestReport.from_item_and_call replaced by code of /testbed/wcwidth/__init__.py"
    assert (result.resolved, result.error_cause, result.grading_channel, result.test_infra_changed) == (
        False, "reporting_tampered", "junit", ())
    assert result.error == (f"{WCWIDTH}: pytest's reporting was tampered with: collection: {replaced}; "
                            f"sessionfinish: {replaced}; unconfigure: {replaced}")
    assert result.fail_to_pass == {F2P: "FAILED"}  # what the guard saw, not the forged XML
    assert set(result.pass_to_pass.values()) == {"PASSED"} and result.missing == 0


@pytest.mark.docker
def test_a_package_init_that_registers_a_forging_plugin_is_caught_by_the_guard(client, wcwidth):  # noqa: F811
    instance, image, repo = wcwidth
    patch, lines = _in_init(repo, HOOK)
    result = grade(client, instance, image.tag, patch, timeout=120)
    assert (result.resolved, result.error_cause, result.fail_to_pass) == (False, "reporting_tampered", {F2P: "FAILED"})
    # the register call is line 11 of HOOK, which starts two lines below the original text
    assert result.error.startswith(
        f"{WCWIDTH}: pytest's reporting was tampered with: a pytest plugin (<wcwidth._F object at 0x")
    assert result.error.endswith(f">) was registered by /testbed/wcwidth/__init__.py:{lines + 2 + 11}")


@pytest.mark.docker
@pytest.mark.parametrize("metadata", ["rtforge-1.0.dist-info/entry_points.txt", "wcwidth.egg-info/entry_points.txt"])
def test_packaging_metadata_that_registers_a_pytest11_plugin_is_put_back_and_named(client, wcwidth, metadata):  # noqa: F811
    instance, image, repo = wcwidth
    files = {"rtforge.py": FORGE, metadata: "[pytest11]\nrtforge = rtforge\n"}
    if metadata.startswith("rtforge"):
        files["rtforge-1.0.dist-info/METADATA"] = "Metadata-Version: 2.1\nName: rtforge\nVersion: 1.0\n"
    result = grade(client, instance, image.tag, recover_patch({}, files), timeout=120)
    assert (result.resolved, result.error, result.grading_channel) == (False, None, "junit")
    assert result.test_infra_changed == tuple(sorted(p for p in files if p != "rtforge.py"))
    assert result.fail_to_pass == {F2P: "FAILED"}
    assert set(result.pass_to_pass.values()) == {"PASSED"} and len(result.pass_to_pass) == 17
