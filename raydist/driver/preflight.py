"""Every job's settings checked before the first job starts.

Hydra composes a job's config only when that job starts, and reports a bad override with
exit status 1; a ``--multirun`` would run its first jobs before reaching a bad one. Here the
command line is expanded into its jobs as Hydra's basic sweeper does, each job's config is
composed and checked against the schema (``raydist.driver.config.check_config``), and the
first problem is returned as one line naming the key and what it accepts.
"""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from raydist.driver.config import ConfigError, LaunchConfig, check_config, describe_config_error

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
    overrides = [o for o in args.overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise ConfigError(str(exc).strip().splitlines()[0]) from exc
    if not args.multirun:
        return None if any(o.is_sweep_override() for o in parsed) else [overrides]
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


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
