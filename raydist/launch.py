"""The main job: ``python -m raydist.launch [hydra overrides]``.

config -> plan -> images -> views -> gate -> units on Ray -> rows -> runs.parquet, preds/,
summary.md (``raydist.driver``). Re-running the same command resumes: finished units are
skipped. Every setting is a field of ``raydist.driver.config.LaunchConfig``; ``--cfg job``
prints them resolved, ``dry_run=true`` prints the plan and starts nothing.

Exit status: 0 when every unit finished; 1 when a unit's row is an error, or the machine or a
service failed the launch (Docker unreachable, the base image missing, a full disk, the model
server not starting: ``infrastructure_error``, one line naming it and what to do); 2 for a
setting or input that is wrong (named, before anything starts); 3 when ``budget.*`` was spent
and kept units from starting, none ended in an error (``summary.md`` names them); 130 when
interrupted. A ``--multirun``
runs every job even when one fails, then exits with the highest status, naming each failed job
(the skeleton every entry shares: ``raydist.launcher``).

Examples::

    python -m raydist.launch                                   # Gemma agent, built-in set, L0 + L3
    python -m raydist.launch +sweep=full_levels agent=oracle   # every level x seeds 0,1,2
    python -m raydist.launch dry_run=true +sweep=full_levels   # the plan, its cost and time
    python -m raydist.launch --multirun agent=oracle,null levels=[L0],[L3]
"""

from __future__ import annotations

import sys
from dataclasses import replace

from omegaconf import DictConfig, OmegaConf

from raydist import launcher  # first: the environment defaults, before Ray or litellm is imported
from raydist._util.run_dirs import job_name
from raydist.driver.config import UNNAMED_OVERRIDES, ConfigError, check_config
from raydist.driver.drive import run_job
from raydist.driver.dry_run import print_plan
from raydist.driver.plan import JobError, plan_job
from raydist.driver.preflight import plan_launch, preflight
from raydist.sandbox.settings import sandbox_at


def view_dir(levels, seeds) -> str:
    """The last part of a run directory: its levels and seeds, e.g. ``L0_L3__s0`` or
    ``implemented__s0-1-2``, so launches of other levels or seeds never share a table."""
    levels = [levels] if isinstance(levels, str) else list(levels)
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    return "_".join(str(level) for level in levels) + "__s" + "-".join(str(seed) for seed in seeds)


def job_subdir(overrides) -> str:
    """What a ``--multirun`` job's run directory adds below ``view_dir``: ``/<name>`` naming
    its ``overrides`` (``hydra.overrides.task``) that change what it computes, e.g.
    ``/view.l3_files=all`` (``raydist._util.run_dirs.job_name`` without
    ``raydist.driver.config.UNNAMED_OVERRIDES``), so no two jobs of a sweep share a table;
    nothing when no such override is given."""
    name = job_name(overrides, UNNAMED_OVERRIDES)
    return f"/{name}" if name else ""


OmegaConf.register_new_resolver("agent_name", lambda a: "null" if a is None else str(a), replace=True)
OmegaConf.register_new_resolver("view_dir", view_dir, replace=True)
OmegaConf.register_new_resolver("job_subdir", job_subdir, replace=True)


def launch(cfg: DictConfig, run_dir: str) -> int:
    """Plan the job of ``cfg`` and run it into ``run_dir`` (or print the plan when
    ``cfg.dry_run``); returns the exit status. Raises what the skeleton maps to a status
    (``raydist.launcher.exit_status_of``): ``ConfigError`` and ``JobError`` (2),
    ``InfrastructureError`` (1)."""
    checked = check_config(cfg)  # ConfigError (2) names the first bad key
    job = plan_job(checked, run_dir)
    if checked.dry_run:
        print_plan(job)
        return 0
    return run_job(job, record=launcher.config_record(cfg))


ENTRY = launcher.Entry(
    config_name="config", run=launch, preflight=preflight,
    sandbox=lambda cfg: sandbox_at(cfg.sandbox),
    # 2: refused before it ran (a setting, a run directory in use); a dry run writes no table
    ran=lambda cfg, status: status != launcher.EXIT_SETTING and not cfg.dry_run)
"""The main job as the launcher skeleton runs it."""


def cli(argv: list[str] | None = None) -> int:
    """``python -m raydist.launch``: plan every job before any starts
    (``raydist.driver.preflight.plan_launch``: a bad setting, input or path of any job exits 2
    with nothing written), print the plans when every job is a dry run (Hydra is not started,
    so no directory is made), else run Hydra's jobs; returns the exit status, naming each
    failed job of a multirun."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        planned = plan_launch(args)
    except (ConfigError, JobError) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr, flush=True)
        return launcher.EXIT_SETTING
    if planned is None:  # --help, --cfg...: Hydra's, after the schema check of the settings
        return launcher.launch(ENTRY, args)
    if all(p.dry_run for p in planned):
        for p in planned:
            print_plan(p.job)
        return 0
    return launcher.launch(replace(ENTRY, preflight=None), args)


if __name__ == "__main__":
    sys.exit(cli())
