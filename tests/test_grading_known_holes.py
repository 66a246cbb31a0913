"""Adversarial patches that make an unresolved instance grade as resolved (known holes)."""
from __future__ import annotations

import pytest

from raydist.grading import grade
from raydist.views import recover_patch
from tests.test_grading import wcwidth  # noqa: F401  (fixture)

# Rewrites every failed report to passed inside the pytest process: junit XML, exit status
# and counters all agree, so every check of raydist.grading.junit passes.
FORGE = ("import _pytest.reports as _r\n_orig = _r.TestReport.from_item_and_call.__func__\n"
         "def _fake(cls, item, call):\n    rep = _orig(cls, item, call)\n"
         "    if rep.outcome == 'failed':\n        rep.outcome = 'passed'; rep.longrepr = None\n    return rep\n"
         "_r.TestReport.from_item_and_call = classmethod(_fake)\n")


def _attack(repo, name):
    init = "wcwidth/__init__.py"
    if name == "package_init_monkeypatches_pytest":
        body = "\ntry:\n" + "".join(f"    {line}\n" for line in FORGE.splitlines()) + "except ImportError:\n    pass\n"
        return recover_patch({init: repo.read(init)}, {init: repo.read(init) + body})
    # a dist-info in /testbed (on sys.path under `python -m pytest`) registers a pytest11 plugin
    return recover_patch({}, {"rtforge.py": FORGE,
                              "rtforge-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: rtforge\nVersion: 1.0\n",
                              "rtforge-1.0.dist-info/entry_points.txt": "[pytest11]\nrtforge = rtforge\n"})


@pytest.mark.docker
@pytest.mark.xfail(strict=True, reason="in-process forgery of pytest reports is not stopped by the junit channel")
@pytest.mark.parametrize("name", ["package_init_monkeypatches_pytest", "dist_info_pytest11_entry_point"])
def test_a_patch_that_forges_reports_in_process_stays_unresolved(client, wcwidth, name):  # noqa: F811
    instance, image, repo = wcwidth
    result = grade(client, instance, image.tag, _attack(repo, name), timeout=120)
    assert result.fail_to_pass == {"tests/test_core.py::test_delete_is_a_control_character": "FAILED"}
    assert result.resolved is False
