"""The one launcher skeleton behind raydist's three Hydra entries: the main job
(``raydist.launch``), DyCodeEval problems (``raydist.launch_problems``) and the recall probe
(``raydist.launch_recall``).

Each entry is an :class:`Entry`: its config name in ``raydist/conf``, a ``plan`` that checks
every job whole before the first starts (``raydist.driver.preflight.plan_jobs``: a refused
launch writes nothing), and a ``run`` that does one job and returns its exit status.
Everything else is here, once:

* environment defaults, set before Ray, litellm or mini-swe-agent are imported;
* the Hydra main (:func:`launch`) and its job wrapper (:func:`run_one`);
* one exception -> exit status mapping (:func:`exit_status_of`): 2 a setting or input that is
  wrong (named, before anything starts), 1 a unit error or the machine or a service failing
  (Docker unreachable, the base image missing, a full disk, a model server not starting), 3 a
  budget that kept work from starting (returned by ``run``), 130 an interrupt;
* multirun bookkeeping (:class:`Jobs`): a failing job does not stop the next, an interrupt
  skips the rest, the process exits with the highest status and names each failed job;
* shutdown and orphan sweep after every job (:func:`shut_down`): Ray stopped, sandbox
  containers whose owner is gone removed;
* the sweep report over the jobs that ran (``raydist.reporting.write_sweep_report``);
* the settings record a job writes into its run directory once it holds it
  (:func:`config_record`; Hydra writes no ``.hydra/``: every entry's config sets
  ``hydra.output_subdir: null``).
"""

from __future__ import annotations

import os

# Before anything imports Ray, litellm or mini-swe-agent (they read these at import).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the price map shipped with litellm: no download

import errno  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import IO  # noqa: E402

from omegaconf import DictConfig, OmegaConf  # noqa: E402

from raydist.driver.config import ConfigError  # noqa: E402
from raydist.driver.plan import JobError  # noqa: E402
from raydist.driver.preflight import CONF_DIR  # noqa: E402
from raydist.models.process import ModelServerError  # noqa: E402
from raydist.outcomes import InfrastructureError  # noqa: E402
from raydist.problems.config import SettingError as ProblemsSettingError  # noqa: E402
from raydist.problems.phases import ProblemsError  # noqa: E402
from raydist.problems.records import RunDirMismatch  # noqa: E402
from raydist.reporting import write_sweep_report  # noqa: E402
from raydist.sandbox import BaseImageMissing, SandboxUnavailable, connect  # noqa: E402

__all__ = ["EXIT_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_SETTING", "Entry", "Jobs", "SettingProblem",
           "config_record", "exit_status_of", "launch", "run_one", "shut_down"]

EXIT_FAILED = 1
"""A unit ended in an error, or the machine or a service failed the launch."""
EXIT_SETTING = 2
"""A setting or an input is wrong; nothing started."""
EXIT_BUDGET = 3
"""``budget.*`` was spent and kept work from starting (``raydist.results.budget.EXIT_BUDGET_SPENT``)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM."""


class SettingProblem(ValueError):
    """A setting an entry checks itself is wrong (exit status 2); ``str()`` names it."""


#: Exceptions that mean "fix a setting or an input": one line, exit 2.
SETTING_ERRORS: tuple[type[BaseException], ...] = (
    SettingProblem, ConfigError, JobError, ProblemsError, ProblemsSettingError, RunDirMismatch)
#: Exceptions that mean "the machine or a service failed": one line, exit 1.
MACHINE_ERRORS: tuple[type[BaseException], ...] = (
    InfrastructureError, SandboxUnavailable, BaseImageMissing, ModelServerError)


def exit_status_of(exc: BaseException, file: IO[str] | None = None) -> int:
    """The exit status of a job that raised ``exc``, after one line on ``file`` (stderr) saying
    why: ``SETTING_ERRORS`` 2, ``MACHINE_ERRORS`` 1, ``KeyboardInterrupt`` 130 (no line: the
    entry's ``interrupted`` note is printed by :func:`run_one`), an ``OSError`` (a full disk, an
    unwritable output_root) 1 with what to do, anything else its traceback and 1."""
    file = sys.stderr if file is None else file
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, SETTING_ERRORS):
        print(f"raydist: error: {exc}", file=file, flush=True)
        return EXIT_SETTING
    if isinstance(exc, MACHINE_ERRORS):
        print(f"raydist: error: {exc}", file=file, flush=True)
        return EXIT_FAILED
    if isinstance(exc, OSError):
        advice = ("free space or choose another output_root" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                  else "check the path named above")
        print(f"raydist: error: {exc}; {advice} (finished items are kept)", file=file, flush=True)
        return EXIT_FAILED
    traceback.print_exception(exc, file=file)
    return EXIT_FAILED


@dataclass(frozen=True)
class Entry:
    """What one launcher supplies to the skeleton.

    * ``config_name``: its primary config in ``raydist/conf`` (``config``, ``problems``, ``recall``).
    * ``run(cfg, run_dir)``: one job, returning its exit status (0, 1, 3) or raising (mapped by
      :func:`exit_status_of`).
    * ``preflight(argv)``: the first problem with any job's settings as one line, or None.
    * ``plan(argv)``: every job planned before any starts, nothing written; None when ``argv``
      runs no job (``--help``...: then ``preflight`` runs). Raises one of ``SETTING_ERRORS``
      (exit status 2, before Hydra makes any folder).
    * ``sandbox(cfg)``: ``(sandbox.provider, its address or None)`` whose orphans are swept after
      a job that ran (the attribute None: the entry starts no container).
    * ``sweep_report``: keyword arguments of ``write_sweep_report``, or None for no report.
    * ``interrupted``: the line printed when a job is interrupted (empty: the job prints its own).
    * ``ran(cfg, status)``: whether a job ran, so left a run directory worth reporting and maybe
      containers (default: it was not refused with 2).
    """

    config_name: str
    run: Callable[[DictConfig, str], int]
    preflight: Callable[[list[str]], str | None] | None = None
    plan: Callable[[list[str]], list | None] | None = None
    sandbox: Callable[[DictConfig], tuple[str, str | None]] | None = None
    sweep_report: dict | None = field(default_factory=dict)
    interrupted: str = ""
    ran: Callable[[DictConfig, int], bool] = lambda cfg, status: status != EXIT_SETTING


@dataclass
class Jobs:
    """The bookkeeping of one process's Hydra jobs: ``(overrides, run_dir, status)`` in launch
    order, the run directories worth a report, and whether a job was interrupted."""

    done: list[tuple[str, str, int]] = field(default_factory=list)
    reported: list[str] = field(default_factory=list)
    interrupted: bool = False

    def record(self, run_dir: str, status: int, overrides: str = "(defaults)") -> None:
        self.done.append((overrides, run_dir, status))

    def status(self, file: IO[str] | None = None, multirun: bool = False) -> int:
        """The highest status of the jobs (0 without any). When more than one job ran (or
        ``multirun``) and some failed, one line per failed job (``raydist: failed job (exit N):
        overrides -> run_dir``) and a last line counting them go to ``file`` (stderr)."""
        file = sys.stderr if file is None else file
        failed = [(o, d, s) for o, d, s in self.done if s]
        if failed and (len(self.done) > 1 or multirun):
            for overrides, run_dir, status in failed:
                print(f"raydist: failed job (exit {status}): {overrides} -> {run_dir}", file=file, flush=True)
            print(f"raydist: {len(failed)} of {len(self.done)} jobs failed: "
                  + ", ".join(f"{run_dir} (exit {status})" for _, run_dir, status in failed), file=file, flush=True)
        return max((status for _, _, status in self.done), default=0)


def shut_down(sandbox: tuple[str, str | None] | None, sweep: bool = True) -> None:
    """Stop this process's Ray (if it started one), then remove the sandbox containers whose
    owner (a Ray worker of this launch, or of one that was killed) is gone, on ``sandbox``
    (``(provider, address)``: ``raydist.sandbox.SandboxProvider.sweep_orphans``). An engine that
    cannot be reached is left alone: the job already reported it."""
    ray = sys.modules.get("ray")  # not imported: never started
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    if not sweep:
        return
    provider, address = sandbox or ("docker", None)
    try:
        connect(provider, address).sweep_orphans()
    except SandboxUnavailable:
        pass


def run_one(entry: Entry, jobs: Jobs, cfg: DictConfig, run_dir: str, overrides: str) -> int:
    """One Hydra job of ``entry``: skipped (130) once a job was interrupted, else run, its
    exception mapped to an exit status, Ray shut down and (when it ran: ``Entry.ran``) orphans
    swept. Never raises and never exits, so the next job of a ``--multirun`` runs; records the
    status in ``jobs``."""
    if jobs.interrupted:
        print(f"raydist: skipped {run_dir}: the sweep was interrupted", file=sys.stderr, flush=True)
        jobs.record(run_dir, EXIT_INTERRUPTED, overrides)
        return EXIT_INTERRUPTED
    try:
        status = entry.run(cfg, run_dir)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one job's failure must not stop the next
        status = exit_status_of(exc)
    ran = entry.ran(cfg, status)  # a job refused (2) or a dry run started no container: nothing to sweep
    try:
        shut_down(entry.sandbox(cfg) if entry.sandbox is not None and ran else None,
                  sweep=entry.sandbox is not None and ran)
    except Exception:  # noqa: BLE001 - a setting that does not resolve: the job already said so
        shut_down(None, sweep=False)
    if status == EXIT_INTERRUPTED:
        jobs.interrupted = True
        if entry.interrupted:
            print(f"\n{entry.interrupted}", file=sys.stderr, flush=True)
    if ran:
        jobs.reported.append(run_dir)
    jobs.record(run_dir, status, overrides)
    return status


def launch(entry: Entry, argv: Sequence[str] | None = None) -> int:
    """Run ``entry`` as ``python -m <its module> [overrides] [hydra flags]``: its plan, or else
    its preflight (any job's bad setting or input exits 2 before the first job starts and
    before Hydra makes any folder), Hydra's jobs through
    :func:`run_one`, the sweep report over the jobs that ran (not after an interrupt), and the
    highest job status, naming the failed jobs (:meth:`Jobs.status`)."""
    import hydra
    from hydra.core.hydra_config import HydraConfig

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        planned = entry.plan(args) if entry.plan is not None else None
    except SETTING_ERRORS as exc:
        print(f"raydist: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_SETTING
    if planned is None and entry.preflight is not None:
        problem = entry.preflight(args)
        if problem:
            print(f"raydist: error: {problem}", file=sys.stderr, flush=True)
            return EXIT_SETTING
    jobs = Jobs()

    def job(cfg: DictConfig) -> int:
        hydra_cfg = HydraConfig.get()
        return run_one(entry, jobs, cfg, hydra_cfg.runtime.output_dir,
                       " ".join(hydra_cfg.overrides.task) or "(defaults)")

    main = hydra.main(config_path=str(CONF_DIR), config_name=entry.config_name, version_base="1.3")(job)
    saved = sys.argv
    sys.argv = [saved[0], *args]
    try:
        main()
    except SystemExit as exc:  # Hydra's own exits: --help, --cfg, a composition error
        if exc.code not in (None, 0):
            return int(exc.code) if isinstance(exc.code, int) else EXIT_FAILED
    finally:
        sys.argv = saved
    if not jobs.interrupted and entry.sweep_report is not None:
        write_sweep_report(jobs.reported, **entry.sweep_report)
    return jobs.status(multirun="--multirun" in args or "-m" in args)


def config_record(cfg: DictConfig) -> dict[str, str]:
    """The files of a run directory's ``.hydra/`` record, by name: ``config.yaml`` (the job's
    settings, interpolations resolved where they can be) and ``overrides.yaml`` (its
    command-line overrides). Each entry writes them (``raydist._util.run_dirs.write_record``)
    once its plan is valid and the run directory is held, so a refused launch leaves a
    finished run's record as it was (Hydra writes none: ``hydra.output_subdir`` is null)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        settings = OmegaConf.to_yaml(cfg, resolve=True)
    except Exception:  # noqa: BLE001 - a resolver only Hydra's job has: keep the interpolation
        settings = OmegaConf.to_yaml(cfg)
    task = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    return {"config.yaml": settings, "overrides.yaml": OmegaConf.to_yaml(OmegaConf.create(task))}
