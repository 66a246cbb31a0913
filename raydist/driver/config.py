"""The main job's settings as structured configs: one dataclass per config node, one default
and one docstring per field. ``conf/config.yaml`` and its groups only select and override.

The runtime dataclasses are the nodes themselves: ``view`` is ``raydist.views.ViewOptions``,
``sandbox.limits`` is ``raydist.sandbox.Limits``, ``budget`` is
``raydist.models.admission.Budget``, ``cluster`` is ``raydist.cluster.scheduler.RayOptions``,
``resume`` is ``raydist.outcomes.RetryPolicy``, ``judge`` is ``raydist.qa.judge.JudgeSettings``;
``check_config`` returns a ``LaunchConfig`` holding them, and ``raydist.driver.plan.plan_job``
plans from it. Whether a field is part of a unit's
key is declared on it (``raydist._util.settings.keyless``); ``UNNAMED_OVERRIDES`` and the
unit key's own lists derive from those marks. The schema is
registered in Hydra's ConfigStore as ``launch_schema`` (the first entry of config.yaml's
defaults list): Hydra then refuses a value of the wrong type while it composes, and an override
of a key the schema lacks (but ``+key=value`` adds one: ``check_known_keys`` refuses it);
``check_config`` runs each node's own checks (e.g. a Docker size string). Entries of
``local_models`` are not checked here.

``agents`` and ``local_models`` are maps of named entries a user extends: an agent entry is
``kind`` plus fields of ``raydist.agents.AgentSettings`` (checked by ``check_agents``), a
model entry is what ``raydist.cluster.serving.serve_model`` takes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from raydist._util.folders import CACHE_DIR, DATA_ROOT, OUTPUT_ROOT
from raydist._util.run_dirs import name_problem
from raydist._util.settings import SettingsError, build, keyless, keyless_fields, keyless_paths, node_types, structured
from raydist._util.storage import StorageError, check_storage_uri
from raydist.agents.settings import AGENT_KINDS, AgentSettings, default_agents
from raydist.cluster.scheduler import RayOptions
from raydist.driver.benchmark import BenchmarkConfig
from raydist.models.admission import Budget
from raydist.outcomes import RetryPolicy
from raydist.qa.judge import JudgeSettings
from raydist.sandbox.settings import SandboxSettings
from raydist.views import level_specs
from raydist.views.base import ViewOptions


class ConfigError(ValueError):
    """A setting that is not allowed; the message names the key and what it accepts."""


@dataclass
class LaunchConfig:
    """The main job: model x agent x level x seed over the instances of one benchmark."""

    agent: str | None = "miniswe"
    """A key of ``agents``: ``miniswe`` (mini-swe-agent on ``model``), ``oracle`` (the gold patch
    through the view) or ``null`` (submits nothing)."""
    model: str = "gemma3-270m"
    """Any litellm model name (keys from the environment) or a ``local_models`` entry."""
    levels: Any = field(default_factory=lambda: ["L0", "L3"])
    """Repository-view levels (SchrodingerRepo §III): a list (``L0``, ``L1+L3``...) or ``implemented``."""
    seeds: Any = field(default_factory=lambda: [0])
    """View seeds: one whole number or a list (§V-C uses three)."""
    attempts: int = 1
    """Independent attempts of every (instance, level, seed): each its own unit and key (attempt
    0 keeps the key a unit had before), so resuming or raising ``attempts`` runs only the
    attempts without a row. Table I adds pass@k over them, the run-to-run standard deviation and
    the L0 noise floor (``raydist.analysis.repositories``)."""
    dry_run: bool = keyless(False)
    """Print the plan (units, images, estimated cost and time) and exit 0; start nothing."""
    gate: bool = True
    """Validity gate before an LLM agent is spent: the oracle must resolve every view and the null
    agent must not; a view that fails is reported and not run. Scripted agents skip it."""
    view: ViewOptions = field(default_factory=ViewOptions)
    """How views are built (``raydist.views.ViewOptions``): l3_files, L1/L4 attempts, the view
    model and its prompts, its request timing (part of no key)."""
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    """The Docker sandbox (``raydist.sandbox.settings.SandboxSettings``)."""
    cluster: RayOptions = keyless(default_factory=RayOptions)
    """Where units run and how many at once (``raydist.cluster.scheduler.RayOptions``; part of no key)."""
    resume: RetryPolicy = keyless(default_factory=RetryPolicy)
    """What runs again (``raydist.outcomes.RetryPolicy``; part of no key)."""
    budget: Budget = keyless(default_factory=Budget)
    """The most this launch may spend on model calls, over every call (agents, L1/L4 view
    building; ``raydist.models.admission.Budget``: ``usd`` in litellm's prices, local models
    cost 0; ``tokens``, prompt plus completion; null: no bound). When spent, no new unit or
    view preparation starts; those in flight finish. Units never started have no row: the
    summary names them and the next launch (with a larger budget) runs them. Part of no key."""
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    """Who scores repository answers (``raydist.qa.judge.JudgeSettings``); part of question units' keys."""
    agents: dict[str, Any] = field(default_factory=default_agents)
    """Named agents: ``kind`` (llm, oracle, null) plus fields of ``raydist.agents.AgentSettings``;
    ``miniswe`` (mini-swe-agent), ``oracle`` and ``null`` by default (``default_agents``)."""
    local_models: dict[str, Any] = field(default_factory=dict)
    """Models raydist serves itself (``raydist.cluster.serving.serve_model``), by name."""
    data_root: str = keyless(DATA_ROOT)
    """Data sets that no package ships; the ``benchmark`` group reads files below it (part of no
    key, as every folder: an instance's key holds its content's hash). Relative: to the
    directory the command was started in, as every folder (``ROOTS``)."""
    cache_dir: str = keyless(CACHE_DIR)
    """Host cache: sdists, wheelhouses, repository snapshots, view preparations, file hashes."""
    output_root: str = keyless(OUTPUT_ROOT)
    """Run directories live below it: ``<benchmark>/<agent>/<model>/<levels>__s<seeds>``; every
    file a launch writes is below it (or below ``cache_dir`` / ``storage``)."""
    storage: str | None = keyless(None)
    """Where run directories and the shared caches are kept besides this disk: a folder (e.g. a
    shared mount) or a URI ``pyarrow.fs`` opens (``file:///...``, ``s3://bucket/prefix``,
    ``gs://...``, ``hdfs://...``; credentials from the environment). The run directory under
    ``output_root`` is then a working copy, filled from ``<storage>/<its path below
    output_root>`` when a launch starts and copied there row by row and at the end; the view
    preparations and DyCodeEval answers live in ``<storage>/_cache/`` instead of ``cache_dir``.
    null: everything stays on the driver's disk (``raydist._util.storage``)."""

    def __post_init__(self) -> None:
        if self.storage is not None and "${" not in self.storage:
            try:
                check_storage_uri(self.storage)
            except StorageError as exc:
                raise ConfigError(str(exc)) from None


#: Overrides the name of a ``--multirun`` job's directory leaves out besides paths and Hydra's
#: own (``raydist._util.run_dirs.job_name`` patterns): the keys its path already names
#: (benchmark, agent, model, levels, seeds, and the ``sweep`` group that sets levels and
#: seeds), the ``sandbox`` group (``sandbox=podman`` picks the provider, part of no key: issue 31)
#: and those that are part of no unit key, as their fields are marked
#: (``raydist._util.settings.keyless``): where and how fast units run, what runs again, how
#: long a model call may take, what the launch may spend, the dry run; and where a model
#: server listens (``local_models`` entries have no schema).
UNNAMED_OVERRIDES = ("benchmark", "benchmark.name", "agent", "model", "levels", "seeds", "sweep", "sandbox",
                     *keyless_paths(LaunchConfig), "local_models.*.host", "local_models.*.replicas",
                     *(f"agents.*.{name}" for name in keyless_fields(AgentSettings)))


#: The folders a launch reads and writes below. Each must be given (not empty); a relative one
#: is made absolute against the directory the command was started in, before any setting that
#: interpolates it (``benchmark.source: ${data_root}/...``) is resolved, so every message
#: names an absolute path.
ROOTS = ("output_root", "data_root", "cache_dir")

#: Settings whose values become folders of a run directory's path
#: (``<output_root>/<benchmark.name>/<agent>/<model>/...``): each must be a safe relative path
#: (``raydist._util.run_dirs.name_problem``).
PATH_NAMES = ("benchmark.name", "agent", "model")


def check_agents(agents: dict) -> None:
    """Every entry of ``agents`` has a ``kind`` of ``AGENT_KINDS`` and only fields of
    ``AgentSettings`` with values it accepts. Raises ``ConfigError`` naming the key."""
    allowed = [f.name for f in fields(AgentSettings)]
    for name, entry in agents.items():
        entry = dict(entry or {})
        kind = entry.pop("kind", None)
        if kind not in AGENT_KINDS:
            raise ConfigError(f"agents.{name}.kind={kind!r}: choose one of {', '.join(AGENT_KINDS)}")
        unknown = sorted(set(entry) - set(allowed))
        if unknown:
            raise ConfigError(f"agents.{name}.{unknown[0]} is not a setting; allowed: kind, {', '.join(allowed)}")
        try:
            AgentSettings(**entry)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"agents.{name}: {exc}") from exc


def check_config(cfg: DictConfig) -> LaunchConfig:
    """``cfg`` (the composed config) as a ``LaunchConfig`` object with every node's checks run,
    every agent entry checked, ``agent`` one of them (``None`` is ``null``), ``levels`` the
    list of level specs (``implemented`` expanded: ``raydist.views.level_specs``) and ``seeds``
    a list, neither naming a value twice, ``attempts`` at least 1, ``output_root``,
    ``data_root`` and ``cache_dir`` given and absolute (``ROOTS``: a relative one is taken from
    the current directory), ``benchmark.name``, ``agent`` and ``model`` safe folder names
    (``check_path_names``) and no empty id list (``check_ids``). Raises ``ConfigError``
    naming the first bad key."""
    try:
        return _check_launch(cfg)
    except ConfigError:
        raise
    except OmegaConfBaseException as exc:
        raise ConfigError(describe_config_error(exc)) from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid setting: {exc}") from exc


def _check_launch(cfg: DictConfig) -> LaunchConfig:
    check_known_keys(cfg)
    launch = _checked(cfg)
    check_agents(launch.agents)
    launch.agent = "null" if launch.agent is None else str(launch.agent)
    if launch.agent not in launch.agents:
        raise ConfigError(f"agent={launch.agent!r} is not defined; choose one of {', '.join(launch.agents)}")
    check_path_names(launch)
    check_ids(launch.benchmark)
    try:
        levels = level_specs(launch.levels if isinstance(launch.levels, str) else list(launch.levels))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    launch.levels = _once("levels", levels)
    launch.seeds = _once("seeds", check_seeds(launch.seeds))
    if isinstance(launch.attempts, bool) or not isinstance(launch.attempts, int) or launch.attempts < 1:
        raise ConfigError(f"attempts={launch.attempts!r}: give a whole number >= 1 (each view runs that many "
                          "times), e.g. attempts=3")
    return launch


def check_path_names(launch: LaunchConfig) -> None:
    """Every setting of ``PATH_NAMES`` is a safe relative path below ``output_root``
    (:func:`check_folder_names`). Raises ``ConfigError`` naming the key, its value and why."""
    values = {"benchmark.name": launch.benchmark.name, "agent": launch.agent, "model": launch.model}
    check_folder_names({key: values[key] for key in PATH_NAMES}, launch.output_root)


def check_folder_names(values: dict[str, object], output_root: str) -> None:
    """Each of ``values`` (setting key -> value; every entry's settings that become folders of
    a run directory below ``output_root``) is a safe relative path
    (``raydist._util.run_dirs.name_problem``: no ``..`` part, no empty part as in
    ``model=openai/``, no leading ``/``, no control character). Raises ``ConfigError`` naming
    the first bad key, its value and why."""
    for key, value in values.items():
        problem = name_problem(value)
        if problem is not None:
            raise ConfigError(f"{key}={value!r}: {problem}; it names folders of the run directory below "
                              f"output_root={output_root} (e.g. model=openai/gpt-4o-mini)")


def check_ids(bench: BenchmarkConfig) -> None:
    """``benchmark.ids`` and ``benchmark.instance_ids`` are not an empty list or string: that
    would name no instance, yet the loader reads it as "every instance". Raises ``ConfigError``
    saying to drop the key to mean every instance."""
    for key in ("ids", "instance_ids"):
        value = getattr(bench, key)
        if value is not None and (value == "" or (isinstance(value, (list, tuple)) and not value)):
            raise ConfigError(f"benchmark.{key}={value!r} names no instance; list the ids to run, "
                              f"e.g. benchmark.{key}=[<instance_id>], or drop the key to run every instance")


def make_roots_absolute(merged: Any) -> None:
    """``merged``'s ``ROOTS`` (a composed config of any entry: the main job, DyCodeEval
    problems, the recall probe) made absolute in place (relative: against the current
    directory, ``~`` expanded), before anything interpolating them is resolved. Raises
    ``ConfigError`` for an empty one."""
    for key in ROOTS:
        value = merged[key]
        if value is None or not str(value).strip():
            raise ConfigError(f"{key} is empty: give a folder, e.g. {key}={_EXAMPLE_ROOTS[key]} (a relative "
                              "folder is taken from the directory the command is started in)")
        merged[key] = os.path.abspath(os.path.expanduser(str(value)))


_EXAMPLE_ROOTS = {"output_root": "runs", "data_root": "../shared/data", "cache_dir": "~/.cache/raydist"}


def _once(name: str, values: list) -> list:
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise ConfigError(f"{name} lists {', '.join(repeated)} more than once; each unit must run once")
    return values


#: The groups the launchers share and check with this schema (``check_group``).
SHARED_GROUPS = ("benchmark", "sandbox", "cluster")


def check_group(key: str, values: Any) -> Any:
    """The ``benchmark``, ``sandbox`` or ``cluster`` group (``key``) of any launcher, ``values``
    a mapping as composed, as its schema node (``BenchmarkConfig``, ``SandboxSettings``,
    ``RayOptions``) with every check of that node run: the one check of these groups, for
    the problems launcher and the recall probe too. Raises
    ``ConfigError`` naming the first bad key (e.g. ``cluster.address=http://...``)."""
    if key not in SHARED_GROUPS:
        raise ValueError(f"{key}: not a shared group ({', '.join(SHARED_GROUPS)})")
    if not isinstance(values, (dict, DictConfig)):
        raise ConfigError(f"{key}={values!r}: give a mapping of {', '.join(allowed_keys(key) or [])}")
    node = OmegaConf.create({key: values})
    check_known_keys(node)
    return _checked(node, key)


def _checked(cfg: DictConfig, key: str | None = None) -> Any:
    """``cfg`` merged onto ``LaunchConfig`` and built into its dataclasses (the runtime ones:
    ``ViewOptions``, ``Limits``, ``Budget``...), every node's checks run; only node ``key`` is
    built when given. Raises ``ConfigError`` naming the first bad key."""
    try:
        merged = OmegaConf.merge(structured(LaunchConfig), cfg)
        if key is None:
            make_roots_absolute(merged)
            return build(LaunchConfig, OmegaConf.to_container(merged, resolve=True))
        node = merged.get(key) if isinstance(merged, DictConfig) else None
        return build(node_types(LaunchConfig)[key], OmegaConf.to_container(node, resolve=True), key)
    except ConfigError:
        raise
    except SettingsError as exc:
        raise ConfigError(str(exc)) from exc
    except OmegaConfBaseException as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, ConfigError) else None
        if cause is not None:
            raise cause from exc
        raise ConfigError(describe_config_error(exc)) from exc


def check_known_keys(cfg: DictConfig, schema: type = LaunchConfig, path: str = "") -> None:
    """Every key of ``cfg`` is a field of ``schema``, node by node down the schema's dataclass
    fields. Hydra lets ``+key=value`` add a key the schema does not have, and a merge with the
    schema keeps it; a misspelt setting would then be ignored without a word. Raises
    ``ConfigError`` naming the key and the keys allowed there."""
    known, nodes = [f.name for f in fields(schema)], node_types(schema)
    for key in cfg.keys():
        where = f"{path}{key!s}"
        if key not in known:
            raise ConfigError(f"config key {where}: not a setting; allowed keys there: {', '.join(known)}")
        child = nodes.get(key)
        if child is not None and isinstance(cfg[key], DictConfig):
            check_known_keys(cfg[key], child, f"{where}.")


def check_seeds(seeds: Any) -> list[int]:
    """``seeds`` (one whole number >= 0 or a list of them) as a list. Raises ``ConfigError``
    naming ``seeds`` and the value."""
    values = list(seeds) if isinstance(seeds, (list, tuple)) else [seeds]
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if not values or bad:
        raise ConfigError(f"seeds={seeds!r}: give a whole number >= 0 or a list of them, e.g. seeds=[0,1,2]")
    return [int(v) for v in values]


def describe_config_error(exc: BaseException) -> str:
    """One line naming the key of an OmegaConf/Hydra error and what that node accepts (the
    fields of the schema node the error names, e.g. the recall probe's ``RecallConfig``, else
    of ``LaunchConfig`` at the key's parent)."""
    key = getattr(exc, "full_key", None) or ""
    message = str(getattr(exc, "msg", None) or exc).strip().splitlines()[0]
    node = getattr(exc, "object_type", None)
    allowed = ([f.name for f in fields(node)] if is_dataclass(node)
               else allowed_keys(key.rpartition(".")[0]) if key else None)
    hint = f"; allowed keys there: {', '.join(allowed)}" if allowed and "not in" in str(exc) else ""
    return f"config key {key or '?'}: {message}{hint}"


def allowed_keys(path: str) -> list[str] | None:
    """The field names of the schema node at dotted ``path`` ("" is the root), or None."""
    node: Any = LaunchConfig
    for part in [p for p in path.split(".") if p]:
        node = node_types(node).get(part)
        if node is None:
            return None
    return [f.name for f in fields(node)]


def register() -> None:
    """Store the schema in Hydra's ConfigStore as ``launch_schema`` (idempotent), every node
    writable (``raydist._util.settings.structured``: the runtime dataclasses are frozen)."""
    ConfigStore.instance().store(name="launch_schema", node=structured(LaunchConfig))


register()
