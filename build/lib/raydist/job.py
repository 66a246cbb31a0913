"""A launch as data (``Job``) and its execution (``run_job``).

``Job.from_config`` validates everything a user can get wrong (agent, model name, levels,
instance files, Docker) before a single unit is spent; ``run_job`` runs what is not yet
finished and compiles the tables.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from raydist._util.hashing import file_sha256, stable_hash
from raydist.cluster.plan import SCRIPTED_AGENTS, RunUnit, build_plan, expand_levels, unit_config_hash
from raydist.cluster.prepare import with_preparation
from raydist.cluster.runner import RayOptions, raise_interrupt
from raydist.cluster.unit import UnitSettings
from raydist.views import ViewOptions


class JobError(Exception):
    """A problem with the configuration or its inputs; the message says what to do."""


@dataclass
class Job:
    """Everything ``run_job`` needs: the plan, the instances, and resolved settings."""

    units: list[RunUnit]
    instances: dict
    settings: UnitSettings
    ray: RayOptions
    model: str
    model_cfg: dict | None  # the local_models entry when raydist serves the model itself
    agent: str
    run_dir: Path
    retry_errors: bool
    title: str
    view_model_cfg: dict | None = None  # local_models entry of view.model (None: hosted)
    view_model_identity: str = ""  # what the L1/L4 preparation cache keys hash for the view model
    gate_units: list[RunUnit] | None = None  # oracle + null units of the validity gate (None: no gate)
    gate_settings: dict | None = None  # agent name -> UnitSettings of the gate's scripted agents
    gate_dir: Path | None = None

    @classmethod
    def from_config(cls, cfg: DictConfig, run_dir: str | Path) -> "Job":
        """Resolve and validate ``cfg``. Raises ``JobError`` naming the bad input."""
        from omegaconf.errors import OmegaConfBaseException

        try:
            return cls._from_config(cfg, run_dir)
        except OmegaConfBaseException as exc:
            key = getattr(exc, "full_key", None) or "?"
            message = str(getattr(exc, "msg", None) or exc).splitlines()[0]
            raise JobError(f"config key {key}: {message}; set it on the command line, e.g. {key}=...") from exc
        except (TypeError, ValueError) as exc:
            raise JobError(f"invalid setting: {exc}") from exc

    @classmethod
    def _from_config(cls, cfg: DictConfig, run_dir: str | Path) -> "Job":
        agent = "null" if cfg.agent is None else str(cfg.agent)
        if agent not in cfg.agents:
            raise JobError(f"agent={agent!r} is not defined; choose one of {', '.join(cfg.agents)}")
        agent_cfg = OmegaConf.to_container(cfg.agents[agent], resolve=True)
        kind = agent_cfg.pop("kind")
        model = str(cfg.model)
        local = OmegaConf.to_container(cfg.local_models, resolve=True).get(model)
        if kind == "llm" and local is None:
            _check_hosted_model(model)
        _check_settings(agent, agent_cfg, cfg)
        instances = _load(cfg)
        levels = _unique("levels", _levels(cfg.levels))
        seeds = _unique("seeds", [int(s) for s in ([cfg.seeds] if isinstance(cfg.seeds, int) else cfg.seeds)])
        view_options = OmegaConf.to_container(cfg.view, resolve=True)
        cache_dir = Path(cfg.cache_dir).expanduser()
        sandbox = cfg.sandbox
        # Everything besides the agent's own settings that can change a unit's result.
        environment = {
            "sandbox": {"limits": OmegaConf.to_container(sandbox.limits, resolve=True), "network": sandbox.network,
                        "base_image": sandbox.base_image},
            "grading_timeout_s": float(sandbox.grading_timeout_s),
        }
        if kind == "llm":
            environment["prompts"] = _agent_prompts_digest(agent, agent_cfg)
            environment["model_server"] = _model_identity(model, local, cache_dir) if local else None
        config_hash = unit_config_hash(agent, agent_cfg, view_options, environment)
        view_model = str(view_options.get("model"))
        view_local = OmegaConf.to_container(cfg.local_models, resolve=True).get(view_model)
        needs_view_model = any(_needs_view_model(level, view_options) for level in levels)
        # Hashing the view model's weights is only worth it when a level asks that model.
        view_identity = _model_identity(view_model, view_local, cache_dir) if needs_view_model else view_model
        units = with_preparation(build_plan(instances, model=model, agent=agent, levels=levels, seeds=seeds,
                                            config_hash=config_hash), ViewOptions(**view_options), view_identity)
        if not units:
            raise JobError(f"the plan is empty: {len(instances)} instances x levels={levels} x seeds={seeds}; "
                           "check benchmark.source, benchmark.ids/limit, levels and seeds")
        settings = UnitSettings(
            agent_kind=kind, agent_settings=agent_cfg, view_options=view_options,
            cache_dir=str(cache_dir), run_dir=str(run_dir),
            docker_host=sandbox.docker_host, base_image=sandbox.base_image, network=sandbox.network,
            limits=OmegaConf.to_container(sandbox.limits, resolve=True),
            grading_timeout_s=float(sandbox.grading_timeout_s),
        )
        ray_opts = RayOptions(**OmegaConf.to_container(cfg.cluster, resolve=True), retry=_retry_policy(cfg))
        title = f"raydist: {cfg.benchmark.name} / {agent}" + ("" if agent in SCRIPTED_AGENTS else f" / {model}")
        if view_local is None and any(_needs_view_model(u.level, view_options) for u in units):
            _check_hosted_model(view_model)
        gate_units, gate_settings = None, None
        if bool(cfg.gate) and kind == "llm":
            gate_units, gate_settings = [], {}
            for name in SCRIPTED_AGENTS:
                scripted = OmegaConf.to_container(cfg.agents[name], resolve=True)
                scripted_kind = scripted.pop("kind")
                gate_settings[name] = replace(settings, agent_kind=scripted_kind, agent_settings=scripted)
                gate_units += with_preparation(
                    build_plan(instances, model=model, agent=name, levels=levels, seeds=seeds,
                               config_hash=unit_config_hash(name, scripted, view_options, environment_of(environment))),
                    ViewOptions(**view_options), view_identity)
        return cls(units=units, instances={i.instance_id: i for i in instances}, settings=settings,
                   ray=ray_opts, model=model, model_cfg=local if kind == "llm" else None, agent=agent,
                   run_dir=Path(run_dir), retry_errors=bool(cfg.resume.retry_errors), title=title,
                   view_model_cfg=view_local, view_model_identity=view_identity,
                   gate_units=gate_units, gate_settings=gate_settings,
                   gate_dir=Path(cfg.output_root) / str(cfg.benchmark.name) / "_gate")


def environment_of(environment: dict) -> dict:
    """The part of a unit's ``environment`` that scripted agents (oracle, null) depend on: the
    sandbox and the grading timeout; they use no prompt and no model."""
    return {k: environment[k] for k in ("sandbox", "grading_timeout_s")}


def _retry_policy(cfg: DictConfig):
    from raydist.outcomes import RetryPolicy

    resume = cfg.get("resume") or {}
    defaults = RetryPolicy()
    return RetryPolicy(max_attempts=int(resume.get("max_attempts", defaults.max_attempts)),
                       backoff_s=float(resume.get("backoff_s", defaults.backoff_s)),
                       backoff_max_s=float(resume.get("backoff_max_s", defaults.backoff_max_s)))


def _agent_prompts_digest(agent: str, agent_cfg: dict) -> str:
    """sha256 (16 hex) of the agent's prompt templates' bytes (``agents.<agent>.prompts_dir``)."""
    from raydist.agents.settings import PROMPT_FILES, AgentSettings
    from raydist.prompts import resolve_prompts_dir

    folder = resolve_prompts_dir(agent_cfg.get("prompts_dir") or AgentSettings().prompts_dir)
    try:
        return stable_hash({name: file_sha256(folder / f"{name}.j2") for name in PROMPT_FILES})
    except FileNotFoundError as exc:
        raise JobError(f"agents.{agent}.prompts_dir={agent_cfg.get('prompts_dir')}: {exc.filename} is missing; "
                       f"the folder must hold {', '.join(f'{n}.j2' for n in PROMPT_FILES)}") from exc


def _model_identity(model: str, local: dict | None, cache_dir: Path) -> str:
    """What decides a model's answers: its name, and for a model raydist serves its server
    command, settings and the sha256 of its weights file (``model_path``; ``embedded`` is the
    embedded Gemma GGUF; a path that is no file, e.g. a hub id for vLLM, counts as its name),
    cached by path, size and mtime under ``cache_dir`` so it is computed once per file."""
    if local is None:
        return model
    fields = {k: local.get(k) for k in ("litellm_model", "model_path", "command", "grammar_server")}
    path = _weights_path(model, local.get("model_path"))
    if path is not None and path.is_file():
        fields["weights_sha256"] = file_sha256(path, cache=cache_dir / "file_hashes.json")
    return stable_hash(fields)


def _weights_path(model: str, model_path) -> Path | None:
    if model_path in (None, "", "embedded"):
        from raydist.models.local import embedded_model_path

        try:
            return Path(embedded_model_path())
        except RuntimeError as exc:
            raise JobError(f"local_models.{model}: {exc}") from exc
    return Path(str(model_path)).expanduser()


def _needs_view_model(level: str, view_options: dict) -> bool:
    from raydist.views import levels_needing

    needs = levels_needing(level)
    return "L1" in needs or ("L4" in needs and int(view_options.get("l4_llm_attempts", 0)) > 0)


def _unique(name: str, values: list) -> list:
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise JobError(f"{name} lists {', '.join(repeated)} more than once; each unit must run once")
    return values


def _check_settings(agent: str, agent_cfg: dict, cfg: DictConfig) -> None:
    """Build every settings object once here, so a bad value fails before any unit runs."""
    from raydist.agents import AgentSettings
    from raydist.sandbox import Limits
    checks = [(f"agents.{agent}", lambda: AgentSettings(**agent_cfg)),
              ("view", lambda: ViewOptions(**OmegaConf.to_container(cfg.view, resolve=True))),
              ("sandbox.limits", lambda: Limits(**OmegaConf.to_container(cfg.sandbox.limits, resolve=True)))]
    for key, build in checks:
        try:
            build()
        except (TypeError, ValueError) as exc:
            raise JobError(f"{key}: {exc}") from exc
    if int(cfg.cluster.max_concurrency) < 1:
        raise JobError(f"cluster.max_concurrency={cfg.cluster.max_concurrency}: must be at least 1")
    if float(cfg.cluster.cpus_per_unit) <= 0:
        raise JobError(f"cluster.cpus_per_unit={cfg.cluster.cpus_per_unit}: must be above 0")


def _check_hosted_model(model: str) -> None:
    from raydist.models.endpoint import UnknownModel, check_model_name

    try:
        check_model_name(model)
    except UnknownModel as exc:
        raise JobError(str(exc)) from exc


def _load(cfg: DictConfig) -> list:
    from raydist.tasks import MalformedInstance, load_instances

    bench = cfg.benchmark
    if bench.get("kind") == "problems":
        raise JobError(f"benchmark={bench.name} is a set of seed problems, not repository tasks: run "
                       f"`python -m raydist.problems.launch benchmark={bench.name}`")
    try:
        ids = [bench.ids] if isinstance(bench.ids, str) else (list(bench.ids) if bench.ids else None)
        if bench.limit is not None and not isinstance(bench.limit, int):
            raise JobError(f"benchmark.limit={bench.limit!r}: give a whole number of instances, or null for all")
        return load_instances(str(bench.source), ids=ids, limit=bench.limit)
    except MalformedInstance as exc:
        raise JobError(f"benchmark={bench.name}: {exc}") from exc
    except (FileNotFoundError, ValueError) as exc:
        raise JobError(f"benchmark={bench.name}: {exc}") from exc


def _levels(levels) -> list[str]:
    from raydist.views import implemented_levels, parse_level

    raw = levels if isinstance(levels, str) else list(levels)
    try:
        out = expand_levels(raw, implemented_levels())
        for level in out:
            parse_level(level)  # repeated parts (L1+full) fail here, before any unit runs
        return out
    except ValueError as exc:
        raise JobError(str(exc)) from exc


def run_job(job: Job) -> None:
    """Run the units of ``job`` that are not finished yet, then write ``runs.parquet``,
    ``steps.parquet``, ``preds.jsonl`` and ``summary.md`` in ``job.run_dir`` and print the summary.

    One launch at a time holds ``job.run_dir`` (``raydist.results.run_dir_lock``): a second
    one raises ``JobError`` at once, naming the directory and the holder's pid.

    SIGTERM and Ctrl-C stop scheduling; rows already written stay, and the tables are
    compiled from them before exiting (status 130). Otherwise the process exits 1 when any
    planned unit's row is an error (``input_error``, ``infrastructure_error`` or ``bug``),
    and returns normally when every unit that ran finished (resolved or unresolved)."""
    from raydist.results import RunDirBusy, run_dir_lock

    try:
        with run_dir_lock(job.run_dir):
            status = _run_locked(job)
    except RunDirBusy as exc:
        raise JobError(str(exc)) from exc
    if status:
        sys.exit(status)


def _run_locked(job: Job) -> int:
    """``run_job`` inside the run directory's lock; returns the exit status (0, 1 or 130)."""
    from raydist.cluster.gate import gate_report
    from raydist.outcomes import ERRORS
    from raydist.results import (ResultStore, action_mix, action_mix_markdown, atomic_write_text, error_counts,
                                 summarise, to_markdown)
    from raydist.sandbox import BaseImageMissing, SandboxUnavailable, connect, ensure_base_image, sweep_orphans

    store = ResultStore(job.run_dir)
    keys = [u.key for u in job.units]
    done = store.finished_keys(keys, retry_errors=job.retry_errors)
    todo = [u for u in job.units if u.key not in done]
    print(f"{job.title}: {len(job.units)} units planned, {len(done)} finished before, {len(todo)} to run; "
          f"results in {job.run_dir}", flush=True)
    try:
        client = connect(job.settings.docker_host)
        job.settings = _with_base_image(job.settings, ensure_base_image(client, job.settings.base_image))
    except (SandboxUnavailable, BaseImageMissing) as exc:
        raise JobError(str(exc)) from exc
    removed = sweep_orphans(client)
    if removed:
        print(f"removed {removed} containers left by an earlier run that was killed", flush=True)
    interrupted = False
    if todo:
        signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            _execute(job, todo, store)
        except OSError as exc:
            raise JobError(f"{exc}; free space or choose another output_root (finished rows are kept)") from exc
        except KeyboardInterrupt:
            interrupted = True
            print("\ninterrupted: finished rows are kept; run the same command again to resume",
                  file=sys.stderr, flush=True)
        finally:
            _shutdown_ray()
            sweep_orphans(client)
    table = store.compile(keys)
    note = "Interrupted before the plan finished." if interrupted else ""
    report = to_markdown(summarise(table), title=job.title, planned=len(job.units), note=note,
                         errors=error_counts(table))
    report += action_mix_markdown(action_mix(table))
    report += gate_report(job)
    atomic_write_text(job.run_dir / "summary.md", report)
    print(report, flush=True)
    if interrupted:
        return 130
    # The tables are complete, but some units have no result: say so to scripts.
    return 1 if any(outcome in ERRORS for outcome in table.column("outcome").to_pylist()) else 0


def _execute(job: Job, todo: list[RunUnit], store) -> list[dict]:
    """Images, view preparation, validity gate, then the units; returns the excluded views."""
    from contextlib import ExitStack

    from raydist.cluster.gate import gate_todo, run_gate
    from raydist.cluster.prepare import attach_prepared, prepare_views
    from raydist.cluster.progress import UnitProgress
    from raydist.cluster.runner import build_images, error_row, init_ray, interrupt_on_signals, run_units
    from raydist.cluster.serving import serve_model
    from raydist.models.server import ModelServerError

    init_ray(job.ray)
    interrupt_on_signals()  # also while it waits on Ray for a preparation or a unit
    _check_capacity(job.ray)
    gate_todo = gate_todo(job, todo)
    everything = [*todo, *gate_todo]
    recipes = {job.instances[u.instance_id].recipe.key(): job.instances[u.instance_id].recipe
               for u in everything if job.instances[u.instance_id].recipe is not None}
    failed = build_images(recipes, job.settings, job.ray)
    runnable, written = [], []
    for unit in todo:
        recipe = job.instances[unit.instance_id].recipe
        if recipe is not None and recipe.key() in failed:
            failure = failed[recipe.key()]
            row = error_row(unit, failure["error"], outcome=failure["outcome"], cause=failure["error_cause"])
            store.write_row(row)
            written.append(row)
        else:
            runnable.append(unit)
    progress = None
    excluded: list[dict] = []
    view_model = job.settings.view_options.get("model")
    servers: dict[str, ExitStack] = {}
    endpoints: dict = {}

    def endpoint_of(name: str, cfg: dict | None):
        if name not in endpoints:
            servers[name] = ExitStack()
            endpoints[name] = servers[name].enter_context(serve_model(name, cfg))
        return endpoints[name]

    try:
        records, prep_errors = prepare_views(job, [*runnable, *gate_todo], lambda: endpoint_of(
            view_model, job.view_model_cfg))
        prepared, runnable = attach_prepared(job, runnable, records, prep_errors, store, written)
        if job.gate_units is not None:
            excluded = run_gate(job, {(u.instance_id, u.level, u.seed) for u in runnable}, records,
                                 prep_errors)
            bad = {(e["instance_id"], e["level"], e["seed"]) for e in excluded}
            runnable = [u for u in runnable if (u.instance_id, u.level, u.seed) not in bad]
        if view_model in servers and view_model != job.model:
            servers.pop(view_model).close()  # free its CPUs (or GPU) for the agents
        if runnable:
            endpoint = endpoint_of(job.model, job.model_cfg) if job.settings.agent_kind == "llm" else None
            # The bar starts with the agent units, after preparation and the gate printed theirs.
            progress = UnitProgress(total=len(job.units), already_done=len(job.units) - len(todo))
            for row in written:
                progress.finished(row)
            run_units(runnable, job.instances, job.settings, endpoint, job.ray, store.write_row, progress,
                      prepared=prepared)
    except ModelServerError as exc:
        raise JobError(f"the model server did not start: {exc}") from exc
    finally:
        if progress is not None:
            progress.close()
        for stack in servers.values():
            stack.close()
    return excluded


def _check_capacity(options: RayOptions) -> None:
    import ray

    cpus = ray.cluster_resources().get("CPU", 0)
    for key, need in (("cluster.cpus_per_unit", options.cpus_per_unit),
                      ("cluster.image_build_cpus", options.image_build_cpus)):
        if need > cpus:
            raise JobError(f"{key}={need} but the Ray cluster has {cpus:g} CPUs: no unit could ever be scheduled")


def _with_base_image(settings: UnitSettings, tag: str) -> UnitSettings:
    from dataclasses import replace

    return replace(settings, base_image=tag)


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
