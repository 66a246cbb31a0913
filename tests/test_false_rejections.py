"""Grader false rejections (``raydist audit-tests``): the gold patch with the functions it changes
rewritten without changing behaviour, graded on the instance's real image. A test planted to
assert an implementation detail (the fix's local variable names) rejects the rewritten fixes and
the audit finds it, confirmed by a second run; the instance's own tests accept them; a test the
gold patch fails makes a bad instance, counted apart. Wilson intervals by hand."""

from __future__ import annotations

import dataclasses
import types

import pytest

from raydist.cli import main as raydist_main
from raydist.cluster.unit_image import unit_image
from raydist.driver.preflight import checked_config
from raydist.driver.view_command import image_settings
from raydist.grading.false_rejections import (
    InstanceAudit,
    Rejection,
    audit_instance,
    summarise_audits,
    wilson_interval,
)
from raydist.tasks import load_instances
from raydist.views.l4.fixes import gold_texts, rewritten_fixes
from raydist.views.recover import apply_patch_to_texts

INSTANCE = "jquast__wcwidth-del-control"
PLANTED = "tests/test_planted.py"


@pytest.fixture(scope="module")
def image(client):
    cfg = checked_config([])
    settings = image_settings(cfg)
    instance = {i.instance_id: i for i in load_instances("builtin")}[INSTANCE]
    return instance, unit_image(instance, settings)


def _planted(instance, body: str, name: str):
    """``instance`` with a new test file in its test patch, run and counted in PASS_TO_PASS."""
    lines = body.splitlines()
    diff = (f"diff --git a/{PLANTED} b/{PLANTED}\nnew file mode 100644\n--- /dev/null\n+++ b/{PLANTED}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))
    return dataclasses.replace(instance, test_patch=instance.test_patch + diff,
                               test_cmd=f"{instance.test_cmd} {PLANTED}",
                               PASS_TO_PASS=(*instance.PASS_TO_PASS, f"{PLANTED}::{name}"))


def _fix_locals(instance, repo) -> set[str]:
    """The local names of the gold-fixed ``wcwidth`` function, from its compiled code."""
    _, fixed = gold_texts(instance, repo)
    code = compile(fixed["wcwidth/wcwidth.py"], "wcwidth.py", "exec")
    [function] = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "wcwidth"]
    return set(function.co_varnames)


def test_rewritten_fixes_apply_to_the_original_and_differ_from_the_gold_patch(image):
    instance, built = image
    fixes = rewritten_fixes(instance, built.repo, range(3))
    originals, fixed = gold_texts(instance, built.repo)
    assert [f.functions for f in fixes] == [("wcwidth/wcwidth.py::wcwidth",)] * len(fixes) and fixes
    for fix in fixes:
        texts = apply_patch_to_texts(originals, fix.patch)
        assert texts["wcwidth/wcwidth.py"] != fixed["wcwidth/wcwidth.py"]
        compile(texts["wcwidth/wcwidth.py"], "wcwidth.py", "exec")


def test_a_planted_implementation_detail_test_is_found_and_the_real_tests_accept_the_fixes(image):
    instance, built = image
    names = sorted(_fix_locals(instance, built.repo))
    planted = _planted(instance, "import wcwidth\n\n\ndef test_locals_are_those_of_the_fix():\n"
                                 f"    assert sorted(wcwidth.wcwidth.__wrapped__.__code__.co_varnames) == {names!r}\n",
                       "test_locals_are_those_of_the_fix")
    fixes = rewritten_fixes(instance, built.repo, range(3))
    renaming = [f for f in fixes if _renames_locals(instance, built.repo, f.patch, names)]
    assert renaming, "no seed renames a local: the planted test could not tell"
    audit = audit_instance(planted, built.repo, built.tests, range(3))
    assert (audit.outcome, audit.fixes) == ("audited", len(fixes))
    assert [r.seed for r in audit.rejections] == [f.seed for f in renaming]
    assert {r.failing for r in audit.rejections} == {(f"{PLANTED}::test_locals_are_those_of_the_fix",)}
    assert audit.flaky == ()
    honest = audit_instance(instance, built.repo, built.tests, range(3))
    assert (honest.outcome, honest.rejections) == ("audited", ())


def _renames_locals(instance, repo, patch: str, names: list[str]) -> bool:
    originals, _ = gold_texts(instance, repo)
    code = compile(apply_patch_to_texts(originals, patch)["wcwidth/wcwidth.py"], "wcwidth.py", "exec")
    [function] = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "wcwidth"]
    return sorted(function.co_varnames) != names


def test_a_test_the_gold_patch_fails_makes_a_bad_instance_not_a_false_rejection(image):
    instance, built = image
    broken = _planted(instance, "def test_never():\n    assert False\n", "test_never")
    audit = audit_instance(broken, built.repo, built.tests, range(3))
    assert (audit.outcome, audit.gold_failing, audit.rejections) == (
        "gold_rejected", (f"{PLANTED}::test_never",), ())


def test_the_share_has_a_wilson_interval_and_bad_instances_are_counted_apart():
    # 0 of 6: Wilson's upper end is z^2 / (n + z^2) = 1.959964^2 / (6 + 3.841459) = 0.390334.
    assert wilson_interval(0, 6) == pytest.approx((0.0, 0.390334), abs=1e-6)
    # 1 of 4: centre (1 + z^2/2) / (4 + z^2) = 2.920730 / 7.841459 = 0.372475, half-width
    # z sqrt(p q / n + z^2 / 4n^2) / (1 + z^2 / n) = 0.326880 -> (0.045595, 0.699355).
    assert wilson_interval(1, 4) == pytest.approx((0.045595, 0.699355), abs=1e-5)
    found = Rejection(0, ("m.py::f",), ("t::x",))
    audits = [InstanceAudit("a", "audited", 3, rejections=(found,)), InstanceAudit("b", "audited", 3),
              InstanceAudit("c", "audited", 1), InstanceAudit("d", "audited", 2),
              InstanceAudit("e", "gold_rejected"), InstanceAudit("f", "no_rewrite")]
    summary = summarise_audits("x", audits, errors=1)
    assert (summary.instances, summary.audited, summary.rejecting, summary.gold_rejected, summary.no_rewrite,
            summary.errors, summary.share) == (7, 4, 1, 1, 1, 1, 0.25)
    assert (summary.low, summary.high) == pytest.approx((0.045595, 0.699355), abs=1e-5)
    with pytest.raises(ValueError, match="successes=3, n=2"):
        wilson_interval(3, 2)


def test_the_command_refuses_a_bad_setting_and_zero_seeds(capsys, tmp_path):
    assert raydist_main(["audit-tests", "--seeds", "0"]) == 2
    assert "--seeds 0: give a whole number >= 1" in capsys.readouterr().err
    assert raydist_main(["audit-tests", "agent=bogus", "--out", str(tmp_path / "a.json")]) == 2
    assert "agent='bogus' is not defined" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists()
