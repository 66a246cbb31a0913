"""Every job's settings checked before the first job starts.

Hydra composes a job's config only when that job starts, and reports a bad override with
exit status 1; a ``--multirun`` would run its first jobs before reaching a bad one. Here the
command line is expanded into its jobs as Hydra's basic sweeper does, each job's config is
composed and checked against the schema (``raydist.driver.config.check_config``), and the
first problem is returned as one line naming the key and what it accepts.

:func:`plan_jobs` goes further, still before anything is written, for any entry: each job's
run directory as Hydra will name it and the job planned whole by the entry. For the main job
(:func:`plan_launch`) that is ``plan_job`` (levels, agent, model, instance selection,
instance file contents) and the paths it will write checked (:func:`check_paths`, by
:func:`check_folders`: below ``output_root``, and writable); the problems and recall entries
plan their own jobs the same way.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from raydist._util.run_dirs import outside
from raydist.cluster.job import Job
from raydist.driver.config import ConfigError, LaunchConfig, check_config, describe_config_error
from raydist.driver.plan import JobError, plan_job
from raydist.sandbox.image_ledger import read_ledger

T = TypeVar("T")

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
"""The main job's config folder (``raydist/conf``)."""

#: Hydra flags after which nothing runs, or that need no job config.
_NO_JOB_FLAGS = ("help", "hydra_help", "info", "shell_completion")


def job_overrides(argv: list[str]) -> list[list[str]] | None:
    """The overrides of each job ``argv`` (``python -m raydist.launch``'s arguments) runs, in
    Hydra's order, without ``hydra.*`` overrides; None when ``argv`` runs no job (``--help``...)
    or is for Hydra to reject (a sweep without ``--multirun``). Raises ``ConfigError`` for an
    override that does not parse."""
    args, _ = get_args_parser().parse_known_args(argv)
    if any(getattr(args, flag, None) for flag in _NO_JOB_FLAGS):
        return None
    overrides = [o for o in args.overrides if not _is_hydra(o)]
    parsed = _parsed(overrides)
    if not args.multirun:
        return None if any(o.is_sweep_override() for o in parsed) else [overrides]
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def _is_hydra(override: str) -> bool:
    return override.lstrip("+~").startswith(("hydra.", "hydra/"))


def _parsed(overrides: list[str]) -> list:
    """``overrides`` parsed by Hydra's grammar. Raises ``ConfigError`` naming the first that
    does not parse, its key and what the parser says (Hydra's own message names no key)."""
    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except HydraException as exc:
            key = override.split("=", 1)[0]
            reason = str(exc).strip().splitlines()[0]
            raise ConfigError(f"config key {key}: the override {override!r} does not parse ({reason}); "
                              "quote a value holding spaces or brackets, e.g. 'levels=[L0,L3]'") from exc
    return parser.parse_overrides(overrides)


def preflight(argv: list[str], config_name: str = "config", check=check_config) -> str | None:
    """The first problem with the settings of any job ``argv`` runs (``"config key ...: ..."``),
    or None when every job's settings are valid. ``config_name`` is the launcher's primary
    config in ``raydist/conf`` (``problems`` for the problems launcher); ``check`` validates a
    composed job config (raising ``ConfigError``), or None to check composition only."""
    try:
        jobs = job_overrides(argv)
    except ConfigError as exc:
        return str(exc)
    if not jobs:
        return None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            for overrides in jobs:
                where = f" (job {' '.join(overrides)})" if len(jobs) > 1 else ""
                try:
                    cfg = compose(config_name, overrides=overrides)
                    if check is not None:
                        check(cfg)
                except ConfigError as exc:
                    return f"{exc}{where}"
                except (HydraException, OmegaConfBaseException) as exc:
                    return f"{_describe(exc)}{where}"
    finally:
        GlobalHydra.instance().clear()
    return None


def _describe(exc: BaseException) -> str:
    """One line for a Hydra composition error, naming the key (from the OmegaConf error it
    wraps, when there is one) and the keys the node allows."""
    inner = exc
    while inner.__cause__ is not None and not hasattr(inner, "full_key"):
        inner = inner.__cause__
    if hasattr(inner, "full_key"):
        return describe_config_error(inner)
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    marks = [i for i, line in enumerate(lines) if line.startswith("Available options")]
    if not marks:
        return lines[0] if lines else type(exc).__name__
    options = []
    for line in lines[marks[0] + 1:]:
        if line.endswith(":"):  # the next section (Hydra's config search path)
            break
        options.append(line)
    return f"{lines[0]}; {lines[marks[0]].rstrip(':')}: {', '.join(options)}"


def checked_config(overrides: list[str]) -> LaunchConfig:
    """The main job's settings for ``overrides`` (``raydist run``'s, one job), composed from
    ``raydist/conf`` and checked (``check_config``), for commands that run in this process
    (``raydist view``, ``raydist audit-tests``). Raises ``ConfigError`` naming the bad key."""
    problem = preflight(list(overrides))
    if problem is not None:
        raise ConfigError(problem)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return check_config(compose("config", overrides=list(overrides)))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_describe(exc)) from exc
    finally:
        GlobalHydra.instance().clear()


@dataclass(frozen=True)
class PlannedJob:
    """One job of the main job's command line, planned before any job starts."""

    overrides: tuple[str, ...]
    """The job's own overrides (no ``hydra.*``), as Hydra's sweeper gives them."""
    run_dir: Path
    """Its run directory as Hydra will name it (``hydra.run.dir`` or the sweep's dir and
    subdir), absolute."""
    job: Job
    """Its plan (``raydist.driver.plan.plan_job``): nothing started, nothing written."""
    dry_run: bool
    """``dry_run=true``: the job prints its plan and writes nothing."""


def plan_launch(argv: list[str]) -> list[PlannedJob] | None:
    """Every job of ``python -m raydist.launch`` ``argv`` planned (:func:`plan_jobs`): each
    job's config checked (``check_config``), its ``Job`` planned (``plan_job``: levels, agent,
    model, the instances chosen and the rows of their file) and its paths checked
    (:func:`check_paths`). None when ``argv`` runs no job (``--help``, ``--cfg``...) or is
    Hydra's to reject. Raises ``ConfigError`` or ``JobError`` (exit status 2) with one line
    naming the bad key or input and, in a ``--multirun``, the job's overrides."""
    return plan_jobs(argv, "config", _plan_one)


def _plan_one(settings: DictConfig, run_dir: Callable[[], Path], overrides: tuple[str, ...]) -> PlannedJob:
    checked = check_config(settings)  # first: a bad setting is named before its run directory is built
    folder = run_dir()
    job = plan_job(checked, folder)
    check_paths(checked, job)
    return PlannedJob(overrides, folder, job, bool(checked.dry_run))


def plan_jobs(argv: list[str], config_name: str, plan: Callable[[DictConfig, Callable[[], Path], tuple[str, ...]], T],
              refusals: tuple[type[Exception], ...] = ()) -> list[T] | None:
    """Every job of an entry's command line ``argv`` planned by ``plan``, in Hydra's order,
    before any starts and with nothing written (the shared step of the three entries:
    ``raydist.launch``, ``raydist.launch_problems``, ``raydist.launch_recall``). Each job's
    config is composed from ``raydist/conf/<config_name>.yaml`` with the ``hydra.*``
    overrides, and ``plan(settings, run_dir, overrides)`` gets the job's config as Hydra hands
    it to the job (no ``hydra`` node), a function returning its run directory as Hydra will
    make it (absolute: :func:`run_dir_of`; call it once the settings that name it are
    checked), and the job's own overrides; it raises on a bad setting or input.

    Returns ``plan``'s results; None when ``argv`` runs no job (``--help``, ``--cfg``...) or
    is Hydra's to reject. Raises ``ConfigError`` (a bad setting or override) or ``JobError``
    (a bad input, and any of ``refusals``: the entry's own setting errors) with one line
    naming it and, in a ``--multirun``, the job's overrides."""
    jobs = job_overrides(argv)
    if not jobs:
        return None
    args, _ = get_args_parser().parse_known_args(argv)
    if args.cfg:
        return None
    hydra_overrides = [o for o in args.overrides if _is_hydra(o)]
    planned = []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            for index, overrides in enumerate(jobs):
                where = f" (job {' '.join(overrides)})" if len(jobs) > 1 else ""
                try:
                    cfg = compose(config_name, overrides=[*hydra_overrides, *overrides], return_hydra_config=True)
                    settings = copy.deepcopy(cfg)  # the job's config, as Hydra hands it to the job
                    with open_dict(settings):
                        del settings["hydra"]
                    planned.append(plan(settings, partial(run_dir_of, cfg, bool(args.multirun), index),
                                        tuple(overrides)))
                except ConfigError as exc:
                    raise ConfigError(f"{exc}{where}") from exc
                except JobError as exc:
                    raise JobError(f"{exc}{where}") from exc
                except refusals as exc:
                    raise JobError(f"{exc}{where}") from exc
                except (HydraException, OmegaConfBaseException) as exc:
                    raise ConfigError(f"{_describe(exc)}{where}") from exc
    finally:
        GlobalHydra.instance().clear()
    return planned


def run_dir_of(cfg: DictConfig, multirun: bool, index: int = 0) -> Path:
    """The run directory Hydra gives job ``index`` of a launch, ``cfg`` its config composed
    with its ``hydra`` node, as ``hydra.core.utils.run_job`` computes it: ``hydra.run.dir``, or
    in a ``--multirun`` the sweep's dir and subdir (``hydra.job.num`` is ``index``, as
    Hydra's basic launcher numbers its jobs), absolute against the current directory."""
    if multirun:
        with read_write(cfg.hydra.job):
            cfg.hydra.job.num = index
    HydraConfig.instance().set_config(cfg)  # ${hydra:overrides.task} and ${hydra:job.num} in the sweep's subdir
    hydra = cfg.hydra
    folder = (os.path.join(str(hydra.sweep.dir), str(OmegaConf.select(cfg, "hydra.sweep.subdir")))
              if multirun else str(hydra.run.dir))
    return Path(os.path.abspath(folder))


def check_paths(cfg: LaunchConfig, job: Job) -> None:
    """The folders the main job of ``cfg`` writes are allowed and can be written, before any
    is (:func:`check_folders`): its run directory and the validity gate's, and ``cache_dir``
    (a dry run writes nothing, so only the first is checked), and the image ledger there reads
    (``raydist.sandbox.image_ledger.read_ledger``). Raises ``ConfigError`` naming the setting and
    the absolute path (the ledger's file)."""
    folders = [("the run directory", Path(job.run_dir))]
    if job.gate is not None:
        folders.append(("the validity gate's folder", Path(job.gate.store_dir)))
    check_folders(cfg.output_root, folders, cfg.cache_dir, write=not cfg.dry_run)
    try:  # the launch stamps its images there at the end: a damaged ledger is said now, not then
        read_ledger(cfg.cache_dir)
    except ValueError as exc:
        raise ConfigError(f"cache_dir={cfg.cache_dir}: {exc}") from None


def check_folders(output_root: str | os.PathLike, folders: Sequence[tuple[str, Path]], cache_dir: str | os.PathLike,
                  *, write: bool = True) -> None:
    """Before anything is written: each of ``folders`` (what it is, its path) lies below
    ``output_root`` (resolved: no ``..``, no symbolic link out; a ``hydra.run.dir`` or
    ``hydra.sweep.dir`` set elsewhere is refused), and on the way to each, and to
    ``cache_dir``, the first part that exists is a folder that this process may write in
    (with ``write``; else only that it is a folder). Raises ``ConfigError`` naming the setting
    and the absolute path."""
    root = Path(output_root)
    for what, folder in folders:
        if outside(root, folder):
            raise ConfigError(f"output_root={root}: {what} {Path(folder).resolve()} is not below it; every file a "
                              "launch writes goes below output_root (set output_root, not hydra.run.dir or "
                              "hydra.sweep.dir)")
        _check_writable("output_root", root, Path(folder), write=write)
    cache = Path(cache_dir)
    _check_writable("cache_dir", cache, cache, write=write)


def _check_writable(key: str, root: Path, folder: Path, write: bool) -> None:
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "a file" if existing.is_file() else "not a folder"
        raise ConfigError(f"{key}={root}: {existing} is {what}; choose another {key} (a folder, or a path "
                          "that does not exist yet)")
    if write and not _can_write(existing, probe=existing != folder):
        raise ConfigError(f"{key}={root}: {existing} cannot be written by this user (read-only or not "
                          f"permitted); choose another {key} or make it writable")


def _can_write(folder: Path, probe: bool) -> bool:
    """Whether this process can make files in ``folder``: its permission bits
    (``os.access``), and with ``probe`` a folder made in it and removed at once, since root
    passes ``os.access`` where the filesystem still refuses (``/sys``, a read-only mount)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    if not probe:
        return True
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".raydist-probe-", dir=folder))
    except OSError:
        return False
    return True
