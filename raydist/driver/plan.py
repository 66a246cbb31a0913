"""The plan phase: a composed config becomes a ``Job``, the frozen record every later phase
reads (``raydist.driver``).

``plan_job`` validates everything a user can get wrong (settings, agent, model name, levels,
instance files) before a single unit is spent, and computes every unit's key. It starts
nothing: no Docker, no Ray, no model; it never assembles or downloads a model's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from raydist._util.hashing import stable_hash
from raydist._util.run_dirs import GATE_DIR
from raydist._util.storage import StorageError, cache_storage, mirror_of
from raydist.agents.settings import AgentSettings
from raydist.cluster.job import GatePlan, Job, ServedModel
from raydist.cluster.kinds import kinds_of
from raydist.cluster.serving import server_arguments
from raydist.cluster.unit import UnitSettings
from raydist.cluster.unit_key import SCRIPTED_AGENTS, RunUnit, plan_units
from raydist.driver.benchmark import load_benchmark
from raydist.driver.config import ConfigError, LaunchConfig, check_config
from raydist.driver.identity import IdentityError, WeightsUnavailable, agent_prompts_digest, model_identity
from raydist.models.endpoint import UnknownModel, check_model_name
from raydist.models.process import ModelServerError
from raydist.qa.judge import load_judge_prompt
from raydist.tasks import MalformedInstance
from raydist.views import level_specs, levels_needing


class JobError(Exception):
    """A problem with the configuration or its inputs (exit status 2); the message says what
    to do. A failure of the machine or a service is ``raydist.outcomes.InfrastructureError``."""


def plan_job(cfg: DictConfig, run_dir: str | Path) -> Job:
    """Resolve and validate ``cfg`` (composed from ``conf/config.yaml``) into a ``Job`` whose
    rows go to ``run_dir``. Raises ``JobError`` naming the bad input. A dry run
    (``cfg.dry_run``) whose model weights are not installed plans all the same, with
    ``Job.keys_unknown`` saying why its keys cannot be a run's."""
    try:
        return _plan(check_config(cfg), Path(run_dir))
    except (ConfigError, IdentityError, StorageError) as exc:
        raise JobError(str(exc)) from exc
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        message = str(getattr(exc, "msg", None) or exc).splitlines()[0]
        raise JobError(f"config key {key}: {message}; set it on the command line, e.g. {key}=...") from exc
    except (TypeError, ValueError) as exc:
        raise JobError(f"invalid setting: {exc}") from exc


def _plan(cfg: LaunchConfig, run_dir: Path) -> Job:
    """The ``Job`` of the checked settings ``cfg`` (``check_config``: ``cfg.view`` is a
    ``ViewOptions``, ``cfg.sandbox.limits`` a ``Limits``...); unit keys hash their fields as
    plain data, so they are those of the composed config."""
    agent = "null" if cfg.agent is None else str(cfg.agent)
    if agent not in cfg.agents:
        raise JobError(f"agent={agent!r} is not defined; choose one of {', '.join(cfg.agents)}")
    agent_cfg = dict(cfg.agents[agent])
    kind = agent_cfg.pop("kind")
    model = str(cfg.model)
    local_models = dict(cfg.local_models)
    local = local_models.get(model)
    if kind == "llm":
        _check_model(model, local)
    instances = _load(cfg)
    levels = _unique("levels", _levels(cfg.levels))
    seeds = _unique("seeds", [int(s) for s in ([cfg.seeds] if isinstance(cfg.seeds, int) else cfg.seeds)])
    view_options = asdict(cfg.view)  # the unit key leaves out its keyless fields (unit_config_hash)
    cache_dir = Path(cfg.cache_dir).expanduser()
    unknown: list[str] | None = [] if cfg.dry_run else None  # why a dry run's keys cannot be a run's
    sandbox = cfg.sandbox
    limits = asdict(sandbox.limits)
    # Everything besides the agent's own settings that can change a unit's result.
    environment = {"sandbox": {"limits": limits, "network": sandbox.network, "base_image": sandbox.base_image},
                   "grading_timeout_s": float(sandbox.grading_timeout_s)}
    scripted_environment = dict(environment)  # scripted agents use no prompt and no model
    if kind == "llm":
        environment["prompts"] = agent_prompts_digest(agent, agent_cfg)
        environment["model_server"] = _model_identity(model, local, cache_dir, unknown) if local else None
    task_kinds = kinds_of(instances)  # raydist.cluster.kinds: patch tasks, questions
    for task_kind, group in task_kinds.values():
        try:
            task_kind.check_plan(group, levels)
        except ValueError as exc:
            raise JobError(str(exc)) from exc
    # Models a task kind needs served besides the agent's: the judge of repository answers.
    served = {name for task_kind, _ in task_kinds.values() for name in task_kind.served}
    judge = _judge(cfg, local_models, cache_dir, unknown) if "judge" in served else None
    if judge is not None:  # question units are judged: the judge's identity and settings are in their keys
        environment["judge"] = scripted_environment["judge"] = judge[1]
    view_name = str(view_options.get("model"))
    view_local = local_models.get(view_name)
    # Hashing the view model's weights is only worth it when a level asks that model.
    needs_view_model = any(_needs_view_model(level, view_options) for level in levels)
    view_model = ServedModel(view_name, view_local, _model_identity(view_name, view_local, cache_dir, unknown)
                             if needs_view_model else view_name)
    options = cfg.view

    def plan_for(name: str, settings: dict, env: dict) -> tuple[RunUnit, ...]:
        return plan_units(instances, model=model, agent=name, levels=levels, seeds=seeds, agent_settings=settings,
                          view_options=view_options, environment=env, view_model_identity=view_model.identity)

    units = plan_for(agent, agent_cfg, environment)
    if not units:
        raise JobError(f"the plan is empty: {len(instances)} instances x levels={levels} x seeds={seeds}; "
                       "check benchmark.source, benchmark.ids/limit, levels and seeds")
    # The keys hash the dicts above as composed; the phases get the classes that use them.
    settings = UnitSettings(
        agent_kind=kind, agent_settings=AgentSettings(**agent_cfg), view_options=options,
        cache_dir=str(cache_dir), run_dir=str(run_dir), sandbox=sandbox, judge=None if judge is None else cfg.judge,
    )
    if needs_view_model:
        _check_model(view_name, view_local)
    gate = None
    # The gate's evidence (oracle resolves, null does not) exists only for kinds with tests.
    if bool(cfg.gate) and kind == "llm" and all(task_kind.gated for task_kind, _ in task_kinds.values()):
        gate_units: list[RunUnit] = []
        gate_settings: dict[str, UnitSettings] = {}
        for name in SCRIPTED_AGENTS:
            scripted = dict(cfg.agents[name])
            kind_of = scripted.pop("kind")
            gate_settings[name] = replace(settings, agent_kind=kind_of, agent_settings=AgentSettings(**scripted))
            gate_units += plan_for(name, scripted, scripted_environment)
        gate_dir = Path(cfg.output_root) / str(cfg.benchmark.name) / GATE_DIR
        gate = GatePlan(tuple(gate_units), gate_settings, gate_dir, mirror_of(cfg.storage, gate_dir, cfg.output_root))
    title = f"raydist: {cfg.benchmark.name} / {agent}" + ("" if agent in SCRIPTED_AGENTS else f" / {model}")
    return Job(units=units, instances={i.instance_id: i for i in instances}, settings=settings,
               ray=cfg.cluster, retry=cfg.resume, agent=agent,
               model=ServedModel(model, local if kind == "llm" else None),
               view_model=view_model, run_dir=run_dir, title=title,
               gate=gate, judge=None if judge is None else judge[0],
               keys_unknown="; ".join(dict.fromkeys(unknown or [])), budget=cfg.budget, storage=cfg.storage,
               views_cache=cache_storage(cfg.storage, cache_dir, "views"),
               mirror=mirror_of(cfg.storage, run_dir, cfg.output_root), benchmark=str(cfg.benchmark.name),
               output_root=Path(cfg.output_root))


def _judge(cfg: LaunchConfig, local_models: dict, cache_dir: Path, unknown):
    """For a launch with repository questions (``raydist.cluster.kinds.QuestionKind.served``):
    ``(ServedModel of the judge, what the unit keys hash of it)``. Raises ``JobError`` for a
    judge model that cannot be served or a prompts folder without ``qa_judge.j2``."""
    judge = cfg.judge
    local = local_models.get(judge.model)
    try:
        _check_model(judge.model, local)
    except JobError as exc:
        raise JobError(f"judge.model={judge.model}: {exc}") from exc
    try:
        prompt = load_judge_prompt(judge.prompts_dir)
    except FileNotFoundError as exc:
        raise JobError(f"judge.prompts_dir={judge.prompts_dir}: {exc}") from exc
    identity = _model_identity(judge.model, local, cache_dir, unknown) if local else judge.model
    hashed = {"model": identity, "prompt": stable_hash(prompt), "attempts": int(judge.attempts),
              "max_tokens": int(judge.max_tokens), "temperature": float(judge.temperature)}
    return ServedModel(judge.model, local, identity), hashed


def _model_identity(name: str, entry: dict | None, cache_dir: Path, unknown: list[str] | None) -> str:
    """``raydist.driver.identity.model_identity``. With ``unknown`` (a dry run), weights that
    are not installed count as the model's name and their reason is appended to ``unknown``."""
    try:
        return model_identity(name, entry, cache_dir)
    except WeightsUnavailable as exc:
        if unknown is None:
            raise
        unknown.append(str(exc))
        return name


def _needs_view_model(level: str, view_options: dict) -> bool:
    needs = levels_needing(level)
    return "L1" in needs or ("L4" in needs and int(view_options.get("l4_llm_attempts", 0)) > 0)


def _unique(name: str, values: list) -> list:
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise JobError(f"{name} lists {', '.join(repeated)} more than once; each unit must run once")
    return values


def _check_model(model: str, local: Mapping[str, Any] | None) -> None:
    """A hosted model's name must be one litellm knows; a ``local_models`` entry's
    ``supervisor`` fails here, named, and not later as a model server that does not start."""
    if local is not None and not local.get("supervisor"):
        return  # a server raydist starts with its default arguments: nothing to check
    try:
        if local is None:
            check_model_name(model)
        else:
            server_arguments(model, dict(local))
    except (UnknownModel, ModelServerError) as exc:
        raise JobError(str(exc)) from exc


def _load(cfg: LaunchConfig) -> list:
    bench = cfg.benchmark
    if bench.kind == "problems":
        raise JobError(f"benchmark={bench.name} is a set of seed problems, not repository tasks: run "
                       f"`python -m raydist.launch_problems benchmark={bench.name}`")
    try:
        return load_benchmark(bench)
    except (MalformedInstance, FileNotFoundError, ValueError) as exc:
        raise JobError(f"benchmark={bench.name}: {exc}") from exc


def _levels(levels) -> list[str]:
    try:
        return level_specs(levels if isinstance(levels, str) else list(levels))
    except ValueError as exc:
        raise JobError(str(exc)) from exc
