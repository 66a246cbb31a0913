"""Do an instance's tests reject correct fixes? The gold patch is graded, then each rewritten
fix (``raydist.views.l4.fixes.rewritten_fixes``: the gold patch with the functions it changes
rewritten without changing behaviour); a rewritten fix that the FAIL_TO_PASS or PASS_TO_PASS
tests reject is graded a second time, and counts as a *confirmed false rejection* only when it
is rejected again with the gold patch accepted (a flake, rejected once and accepted once, is
counted apart). OpenAI's audit of SWE-bench Verified and third-party audits of SWE-bench Pro
report graders that reject correct fixes; this measures it per instance set.

Outcomes are kept apart: ``gold_rejected`` (the gold patch itself fails: a bad instance, not a
test that is too narrow), ``no_rewrite`` (nothing in the changed functions could be rewritten:
not audited), ``audited`` (at least one rewritten fix graded).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from raydist._util.extras import require
from raydist.grading.rules import PASSED
from raydist.grading.testrun import TestRunner
from raydist.views.base import RepoFiles
from raydist.views.l4.fixes import rewritten_fixes


@dataclass(frozen=True)
class Rejection:
    """A rewritten fix (``seed``, the ``functions`` rewritten) the tests rejected: ``failing``,
    the FAIL_TO_PASS / PASS_TO_PASS ids that did not pass in both runs (one run for a flake)."""

    seed: int
    functions: tuple[str, ...]
    failing: tuple[str, ...]


@dataclass(frozen=True)
class InstanceAudit:
    """One instance's audit: ``outcome`` (``audited``, ``gold_rejected``, ``no_rewrite``),
    ``fixes`` (rewritten fixes graded), ``rejections`` (confirmed), ``flaky`` (rejected once,
    accepted on the second run), ``gold_failing`` (tests the gold patch fails, when rejected)."""

    instance_id: str
    outcome: str
    fixes: int = 0
    rejections: tuple[Rejection, ...] = ()
    flaky: tuple[Rejection, ...] = ()
    gold_failing: tuple[str, ...] = ()

    @property
    def rejects_correct_fixes(self) -> bool:
        """A confirmed false rejection."""
        return bool(self.rejections)


def _failing(run) -> tuple[str, ...]:
    return tuple(sorted(t for t, s in {**run.fail_to_pass, **run.pass_to_pass}.items() if s != PASSED))


def audit_instance(instance, repo: RepoFiles, runner: TestRunner, seeds: Sequence[int]) -> InstanceAudit:
    """Grade the gold patch, then every rewritten fix for ``seeds`` with ``runner`` (the
    instance's ``TestRunner``, Docker), a rejected one twice (module docstring). Raises what the
    runner raises (an infrastructure error) and ``PatchApplyError`` when the gold patch does not
    apply to ``repo``."""
    fixes = rewritten_fixes(instance, repo, seeds)
    gold = runner.run(instance, instance.patch)
    if not gold.resolved:
        return InstanceAudit(instance.instance_id, "gold_rejected", gold_failing=_failing(gold))
    if not fixes:
        return InstanceAudit(instance.instance_id, "no_rewrite")
    confirmed, flaky = [], []
    for fix in fixes:
        first = runner.run(instance, fix.patch)
        if first.resolved:
            continue
        second = runner.run(instance, fix.patch)
        if second.resolved:
            flaky.append(Rejection(fix.seed, fix.functions, _failing(first)))
        else:
            both = tuple(sorted(set(_failing(first)) & set(_failing(second)))) or _failing(second)
            confirmed.append(Rejection(fix.seed, fix.functions, both))
    return InstanceAudit(instance.instance_id, "audited", len(fixes), tuple(confirmed), tuple(flaky))


@dataclass(frozen=True)
class FalseRejectionSummary:
    """An instance set's figure: of ``audited`` instances, ``rejecting`` have at least one
    confirmed false rejection; ``share`` is their fraction with its 95% Wilson interval
    (``low``, ``high``; None when nothing was audited); ``gold_rejected``, ``no_rewrite`` and
    ``errors`` (instances whose audit could not run) are counted apart; ``instances`` lists the
    rejecting instances with their tests."""

    benchmark: str
    instances: int
    audited: int
    rejecting: int
    share: float | None
    low: float | None
    high: float | None
    gold_rejected: int
    no_rewrite: int
    errors: int
    flaky: int
    rejections: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain data (JSON)."""
        return asdict(self)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (``scipy.stats.binomtest(...)
    .proportion_ci(method="wilson")``). Raises ValueError unless ``0 <= successes <= n >= 1``."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n >= 1, got successes={successes}, n={n}")
    stats = require("scipy.stats", "analysis", "the Wilson interval")
    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def summarise_audits(benchmark: str, audits: Iterable[InstanceAudit], errors: int = 0) -> FalseRejectionSummary:
    """The ``FalseRejectionSummary`` of ``audits`` (one per instance); ``errors`` instances
    whose audit raised are counted apart."""
    audits = list(audits)
    audited = [a for a in audits if a.outcome == "audited"]
    rejecting = [a for a in audited if a.rejects_correct_fixes]
    low = high = share = None
    if audited:
        share = len(rejecting) / len(audited)
        low, high = wilson_interval(len(rejecting), len(audited))
        low, high = max(0.0, low), min(1.0, high)
    return FalseRejectionSummary(
        benchmark=benchmark, instances=len(audits) + errors, audited=len(audited), rejecting=len(rejecting),
        share=share, low=low, high=high, gold_rejected=sum(a.outcome == "gold_rejected" for a in audits),
        no_rewrite=sum(a.outcome == "no_rewrite" for a in audits), errors=errors,
        flaky=sum(bool(a.flaky) for a in audited),
        rejections={a.instance_id: sorted({t for r in a.rejections for t in r.failing}) for a in rejecting})

