"""The plan phase: a composed config becomes a ``Job``, the frozen record every later phase
reads (``raydist.driver``).

``plan_job`` validates everything a user can get wrong (settings, agent, model name, levels,
instance files) before a single unit is spent, and computes every unit's key. It starts
nothing: no Docker, no Ray, no model; it never assembles or downloads a model's weights.
"""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from pathlib import Path

from omegaconf.errors import OmegaConfBaseException

from raydist._util.run_dirs import GATE_DIR
from raydist._util.storage import JsonCache, StorageError, cache_storage, mirror_of
from raydist.agents.settings import AgentSettings
from raydist.cluster.job import GatePlan, Job
from raydist.cluster.kinds import kinds_of
from raydist.cluster.served import IdentityError, ModelRefused, plan_models
from raydist.cluster.unit import UnitSettings
from raydist.cluster.unit_key import SCRIPTED_AGENTS, RunUnit, UnitPlan, plan_units
from raydist.driver.benchmark import load_benchmark
from raydist.driver.config import ConfigError, LaunchConfig
from raydist.grading.environment import GRADING_ENV
from raydist.tasks import MalformedInstance


class JobError(Exception):
    """A problem with the configuration or its inputs (exit status 2); the message says what
    to do. A failure of the machine or a service is ``raydist.outcomes.InfrastructureError``."""


def plan_job(cfg: LaunchConfig, run_dir: str | Path) -> Job:
    """The ``Job`` of the checked settings ``cfg`` (``raydist.driver.config.check_config`` of
    the config composed from ``conf/config.yaml``), its rows going to ``run_dir``. Raises
    ``JobError`` naming the bad input. A dry run (``cfg.dry_run``) whose model weights are not
    installed plans all the same, with ``Job.keys_unknown`` saying why its keys cannot be a
    run's."""
    try:
        return _plan(cfg, Path(run_dir))
    except (ConfigError, IdentityError, ModelRefused, StorageError) as exc:
        raise JobError(str(exc)) from exc
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        message = str(getattr(exc, "msg", None) or exc).splitlines()[0]
        raise JobError(f"config key {key}: {message}; set it on the command line, e.g. {key}=...") from exc
    except (TypeError, ValueError) as exc:
        raise JobError(f"invalid setting: {exc}") from exc


def _plan(cfg: LaunchConfig, run_dir: Path) -> Job:
    """The ``Job`` of the checked settings ``cfg`` (``check_config``: ``cfg.view`` is a
    ``ViewOptions``, ``cfg.levels`` the level specs...); unit keys hash their fields as plain
    data, so they are those of the composed config."""
    agent_cfg = dict(cfg.agents[str(cfg.agent)])
    kind = agent_cfg.pop("kind")
    instances = _load(cfg)
    task_kinds = kinds_of(instances)  # raydist.cluster.kinds: patch tasks, questions
    for task_kind, group in task_kinds.values():
        try:
            task_kind.check_plan(group, cfg.levels)
        except ValueError as exc:
            raise JobError(str(exc)) from exc
    # Models a task kind needs served besides the agent's: the judge of repository answers.
    judged = "judge" in {name for task_kind, _ in task_kinds.values() for name in task_kind.served}
    cache_dir = Path(cfg.cache_dir).expanduser()
    unknown: list[str] | None = [] if cfg.dry_run else None  # why a dry run's keys cannot be a run's
    models = plan_models(agent=str(cfg.agent), agent_cfg=agent_cfg, llm=kind == "llm", model=str(cfg.model),
                         local_models=dict(cfg.local_models), view_model=str(cfg.view.model), levels=cfg.levels,
                         l4_llm_attempts=cfg.view.l4_llm_attempts,
                         judge=cfg.judge if judged else None, cache_dir=cache_dir, unknown=unknown)
    sandbox = cfg.sandbox
    # Everything besides the agent's own settings that can change a unit's result.
    environment = {"sandbox": {"limits": asdict(sandbox.limits), "network": sandbox.network,
                               "base_image": sandbox.base_image},
                   "grading_timeout_s": float(sandbox.grading_timeout_s), "grading_env": dict(GRADING_ENV)}
    # Scripted agents use no prompt and no model; question units are judged all the same.
    scripted_environment = {**environment, **({"judge": models.judge_key} if models.judge_key else {})}
    view_options = asdict(cfg.view)  # the unit key leaves out its keyless fields (unit_config_hash)

    def plan_for(name: str, settings: dict, env: dict, attempts: int = 1) -> UnitPlan:
        return plan_units(instances, model=str(cfg.model), agent=name, levels=cfg.levels, seeds=cfg.seeds,
                          agent_settings=settings, view_options=view_options, environment=env,
                          view_model_identity=models.view.identity, attempts=attempts)

    planned = plan_for(str(cfg.agent), agent_cfg, {**environment, **models.environment}, cfg.attempts)
    units = planned.units
    if not units:
        raise JobError(f"the plan is empty: {len(instances)} instances x levels={cfg.levels} x seeds={cfg.seeds}; "
                       "check benchmark.source, benchmark.ids/limit, levels and seeds")
    # The keys hash the dicts above as composed; the phases get the classes that use them.
    settings = UnitSettings(
        agent_kind=kind, agent_settings=AgentSettings(**agent_cfg), view_options=cfg.view,
        cache_dir=str(cache_dir), run_dir=str(run_dir), sandbox=sandbox, judge=cfg.judge if judged else None,
    )
    gate = None
    # The gate's evidence (oracle resolves, null does not) exists only for kinds with tests.
    if bool(cfg.gate) and kind == "llm" and all(task_kind.gated for task_kind, _ in task_kinds.values()):
        gate_units: list[RunUnit] = []
        gate_settings: dict[str, UnitSettings] = {}
        for name in SCRIPTED_AGENTS:
            scripted = dict(cfg.agents[name])
            kind_of = scripted.pop("kind")
            gate_settings[name] = replace(settings, agent_kind=kind_of, agent_settings=AgentSettings(**scripted))
            gate_units += plan_for(name, scripted, scripted_environment).units  # one attempt per view
        gate_dir = Path(cfg.output_root) / str(cfg.benchmark.name) / GATE_DIR
        gate = GatePlan(tuple(gate_units), gate_settings, gate_dir, mirror_of(cfg.storage, gate_dir, cfg.output_root))
    title = f"raydist: {cfg.benchmark.name} / {cfg.agent}" + ("" if cfg.agent in SCRIPTED_AGENTS else f" / {cfg.model}")
    # The gate's units are on the same views: the agent's units name every preparation.
    return Job(units=units, instances={i.instance_id: i for i in instances}, settings=settings, ray=cfg.cluster,
               retry=cfg.resume, agent=str(cfg.agent), model=models.agent, view_model=models.view, run_dir=run_dir,
               title=title, gate=gate, judge=models.judge, keys_unknown="; ".join(dict.fromkeys(unknown or [])),
               budget=cfg.budget, storage=cfg.storage, preparations=planned.preparations,
               views_cache=JsonCache(cache_storage(cfg.storage, cache_dir, "views"), indent=1),
               mirror=mirror_of(cfg.storage, run_dir, cfg.output_root), benchmark=str(cfg.benchmark.name),
               output_root=Path(cfg.output_root))


def _load(cfg: LaunchConfig) -> list:
    bench = cfg.benchmark
    if bench.kind == "problems":
        raise JobError(f"benchmark={bench.name} is a set of seed problems, not repository tasks: run "
                       f"`python -m raydist.launch_problems benchmark={bench.name}`")
    bench = replace(bench, source=_absolute(bench.source), path=_absolute(bench.path))
    try:
        return load_benchmark(bench)
    except FileNotFoundError as exc:
        raise JobError(f"benchmark={bench.name}: {exc}{_below_data_root(bench, cfg.data_root)}") from exc
    except (MalformedInstance, ValueError) as exc:
        raise JobError(f"benchmark={bench.name}: {exc}") from exc


#: What a local instance file is named (a ``benchmark.path`` may instead be a dataset's name).
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


def _absolute(value: str | None) -> str | None:
    """A relative local file ``value`` (``benchmark.source`` or ``.path``) made absolute against
    the current directory, so a message names where it was looked for; ``builtin``, URIs and
    dataset names are kept."""
    if not value or "://" in value or os.path.isabs(value):
        return value
    if os.path.lexists(value) or value.endswith(_FILE_SUFFIXES):
        return os.path.abspath(value)
    return value


def _below_data_root(bench, data_root: str) -> str:
    """When the missing file of ``bench`` lies below ``data_root`` (``benchmark.source:
    ${data_root}/...``): the advice to set ``data_root``, naming its absolute path; else ""."""
    source = bench.source or bench.path
    if not source or not os.path.isabs(str(source)):
        return ""
    root = os.path.abspath(data_root)
    if os.path.commonpath([root, os.path.abspath(str(source))]) != root:
        return ""
    return (f"; it is read below data_root={root} (a relative data_root is taken from the directory the command "
            f"was started in, {os.getcwd()}): set data_root=<the folder holding "
            f"{os.path.relpath(str(source), root)}> or the environment variable RAYDIST_DATA_ROOT")
