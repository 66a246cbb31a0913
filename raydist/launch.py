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
runs every job even when one fails, then exits with the highest status, naming each failed job.

Examples::

    python -m raydist.launch                                   # Gemma agent, built-in set, L0 + L3
    python -m raydist.launch +sweep=full_levels agent=oracle   # every level x seeds 0,1,2
    python -m raydist.launch dry_run=true +sweep=full_levels   # the plan, its cost and time
    python -m raydist.launch --multirun agent=oracle,null levels=[L0],[L3]
"""

from __future__ import annotations

import os
import sys
import traceback

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

import raydist.driver.config  # noqa: E402,F401 - registers the schema (launch_schema) with Hydra
from raydist.driver.plan import JobError  # noqa: E402
from raydist.outcomes import InfrastructureError  # noqa: E402


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
    from raydist._util.run_dirs import job_name
    from raydist.driver.config import UNNAMED_OVERRIDES

    name = job_name(overrides, UNNAMED_OVERRIDES)
    return f"/{name}" if name else ""


OmegaConf.register_new_resolver("agent_name", lambda a: "null" if a is None else str(a), replace=True)
OmegaConf.register_new_resolver("view_dir", view_dir, replace=True)
OmegaConf.register_new_resolver("job_subdir", job_subdir, replace=True)

#: ``(job overrides, run directory, status)`` of every job of this process that did not end 0.
FAILED: list[tuple[str, str, int]] = []
#: The run directory of every job of this process that ran (not a dry run, not refused), in order.
RUN_DIRS: list[str] = []


def launch(cfg: DictConfig, run_dir: str) -> int:
    """Plan the job of ``cfg`` and run it into ``run_dir`` (or print the plan when
    ``cfg.dry_run``); returns the exit status. Never raises: a user error prints one line
    (status 2), a failure of the machine or a service one line (status 1), anything else its
    traceback (status 1)."""
    from raydist.driver.plan import plan_job

    try:
        job = plan_job(cfg, run_dir)
        if cfg.dry_run:
            from raydist.driver.dry_run import print_plan

            print_plan(job, cfg)
            return 0
        from raydist.driver.drive import run_job

        return run_job(job)
    except JobError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except InfrastructureError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception:  # noqa: BLE001 - one job's failure must not stop the next of a multirun
        traceback.print_exc()
        return 1


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> int:
    """One Hydra job: build the plan from the config and hand it on. Records a failure in
    ``FAILED`` instead of exiting, so a ``--multirun`` goes on with its next job; an
    interrupt stops the whole sweep."""
    hydra_cfg = HydraConfig.get()
    status = launch(cfg, hydra_cfg.runtime.output_dir)
    if not cfg.dry_run and status != 2:  # 2: refused before it ran (a setting, a run directory in use)
        RUN_DIRS.append(hydra_cfg.runtime.output_dir)
    if status:
        FAILED.append((" ".join(hydra_cfg.overrides.task) or "(defaults)", hydra_cfg.runtime.output_dir, status))
    if status == 130:
        sys.exit(130)
    return status


def cli(argv: list[str] | None = None) -> int:
    """``python -m raydist.launch``: check every job's settings (``raydist.driver.preflight``),
    run Hydra, and return the exit status, naming each failed job of a multirun."""
    from raydist.driver.preflight import preflight

    argv = sys.argv[1:] if argv is None else argv
    problem = preflight(argv)
    if problem:
        print(f"raydist: error: {problem}", file=sys.stderr, flush=True)
        return 2
    interrupted = False
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (None, 0, 130):
            return int(exc.code) if isinstance(exc.code, int) else 1
        interrupted = exc.code == 130
    if not interrupted:
        from raydist.reporting import write_sweep_report

        write_sweep_report(RUN_DIRS)
    if not FAILED:
        return 0
    if "--multirun" in argv or "-m" in argv:
        for overrides, run_dir, status in FAILED:
            print(f"raydist: failed job (exit {status}): {overrides} -> {run_dir}", file=sys.stderr, flush=True)
    return max(status for _, _, status in FAILED)


if __name__ == "__main__":
    sys.exit(cli())
