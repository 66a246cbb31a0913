"""One DyCodeEval launch as a list of phases::

    seeds -> generate -> validate -> execute -> metrics -> report

Each phase is a function with frozen inputs and a frozen output (``raydist.problems.phases``,
``.summary``, ``.report``); the driver calls them in order and hands each output on. Every
phase skips the items it finished in an earlier launch, so the same command resumes.
"""

from __future__ import annotations

from collections.abc import Mapping

from raydist._util.files import atomic_write_text
from raydist._util.run_dirs import write_record
from raydist._util.storage import mirrored
from raydist.cluster.scheduler import init_ray, interrupt_on_signals
from raydist.models.admission import Admission
from raydist.problems.job import ProblemsJob
from raydist.problems.phases import ProblemsError, execute, generate, seeds, validate
from raydist.problems.records import check_run_dir
from raydist.problems.report import report
from raydist.problems.summary import metrics
from raydist.results.budget import Spending
from raydist.sandbox import Limits, connect, ensure_base_image

__all__ = ["run_problems"]


def run_problems(job: ProblemsJob, record: Mapping[str, str] | None = None) -> dict:
    """Run every phase ``job.pipeline`` asks for; returns the summary numbers it printed
    (``raydist.problems.summary.Metrics.numbers``). ``record`` (the launch's settings:
    ``raydist.launcher.config_record``) is written to ``<run_dir>/.hydra/`` once the run
    directory is known to hold variants of these settings, before any phase writes.

    Raises ``ProblemsError`` (bad seed selection), ``RunDirMismatch`` (the run directory holds
    variants of other settings), ``SandboxUnavailable`` / ``BaseImageMissing`` (no sandbox)."""
    seed_set = seeds(job)
    budget = job.settings.budget
    with mirrored(job.mirror(), job.run_dir):
        check_run_dir(job.run_dir, job.run_settings())
        write_record(job.run_dir, record)
        image = _start(job)
        making = job.pipeline in ("full", "generate")
        with Admission(budget, max_calls=job.ray.max_concurrency) as admission:
            generated = generate(job, seed_set, run=making, admission=admission)
            validated = validate(job, generated, image, run=making)
            if job.pipeline == "evaluate" and not validated.variants:
                print(f"note: {job.run_dir / 'variants'} holds no variants of these settings: run pipeline=generate "
                      "(or full) first; evaluating the seed problems only", flush=True)
            executed = execute(job, seed_set, validated, image, run=job.pipeline in ("full", "evaluate"),
                               admission=admission)
            spending = _spending(budget, admission, (*generated.not_started, *executed.not_started))
        result = metrics(job, seed_set, generated, validated, executed)
        report(job, seed_set, validated, result)
        spending.write(job.run_dir)
        _append_spending(job.run_dir / "summary.md", spending)
    return {**result.numbers, "not_started": len(spending.not_started), "spent": spending.totals}


def _spending(budget, admission, not_started: tuple[dict, ...]) -> Spending:
    """The launch's ``Spending`` (``raydist.results.budget``): the ledger's totals and the items
    the budget kept from starting."""
    reason = admission.spent() if not_started else None
    return Spending({"usd": budget.usd, "tokens": budget.tokens}, admission.totals(), reason, not_started)


def _append_spending(summary, spending: Spending) -> None:
    """Put the spending under ``summary`` (written by ``report``) and its stop line on top; print both."""
    text = summary.read_text() if summary.exists() else ""
    if spending.summary_line():
        text = f"{spending.summary_line()}\n\n{text}"
    atomic_write_text(summary, text + spending.markdown())
    print(spending.summary_line() + spending.markdown(), flush=True)


def _start(job: ProblemsJob) -> str:
    """The sandbox's base image (built when missing) and Ray, started; the image's tag. Raises
    ``ProblemsError`` (exit status 2) when the provider cannot enforce limits on its host
    (``SandboxProvider.check``: rootless Podman on cgroup v1)."""
    provider = connect(*job.sandbox_at)
    try:
        provider.check(Limits())
    except ValueError as exc:
        raise ProblemsError(str(exc)) from exc
    image = ensure_base_image(provider, job.base_image)
    init_ray(job.ray)
    interrupt_on_signals()  # the launcher keeps every finished item and says how to resume
    return image
