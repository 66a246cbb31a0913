"""The unit key: every run unit of a launch, with a stable key. The one module that says what
a unit's key hashes (``unit_config_hash``, ``with_preparation``) and builds the units
(``plan_units``); ``raydist.driver.plan`` hands it the checked settings.

A run unit is one (instance, model, agent, level, seed). Its key hashes everything that
determines its outcome: the instance's content, the model (for a served model, its server
command and the sha256 of its weights), the agent's settings and prompt files' contents, the
level, the seed, the view options, the sandbox's limits, network and base image, and the
grading timeout (``unit_config_hash``). Re-running the same command therefore finds the same keys,
which is what makes resuming exact; changing a setting that matters yields new keys, so a
stale row is never mistaken for a result of the new configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property

from raydist._util.hashing import stable_hash
from raydist._util.settings import keyless_fields
from raydist.agents.settings import AgentSettings
from raydist.cluster.prepare import ANY_INSTANCE, PrepTask, task_key
from raydist.views import ViewOptions, levels_needing
from raydist.views.base import TIMING_OPTIONS

SCRIPTED_AGENTS = ("oracle", "null")


@dataclass(frozen=True)
class RunUnit:
    """One (instance, model, agent, level, seed) to run; ``config_hash`` covers the settings
    that change its outcome (agent settings, model settings, view options)."""

    instance_id: str
    instance_hash: str
    model: str
    agent: str
    level: str
    seed: int
    config_hash: str

    @cached_property
    def key(self) -> str:
        """24 hex chars identifying this unit across launches (stable under re-runs). Computed
        once per object (a sweep asks for it several times per unit in every phase)."""
        return stable_hash(asdict(self), 24)


#: Agent settings that cannot change a result: how long one model call may take and how
#: often a transient failure is retried (a call that fails for good is an infrastructure error),
#: as ``raydist.agents.settings.AgentSettings`` marks them (``raydist._util.settings.keyless``).
KEYLESS_AGENT_SETTINGS = keyless_fields(AgentSettings)


def unit_config_hash(agent: str, agent_settings: Mapping, view_options: Mapping,
                     environment: Mapping | None = None) -> str:
    """Hash of everything besides the instance, model, level and seed that can change a
    unit's result: the agent's settings (limits, decoding, prompt folder; not
    ``KEYLESS_AGENT_SETTINGS``), the view options (not the view-model timing options,
    ``raydist.views.base.TIMING_OPTIONS``) and ``environment``: what the launch adds, e.g.
    ``{"sandbox": {"limits", "network", "base_image"}, "grading_timeout_s", "prompts"`` (the
    prompt files' digest) ``, "model_server"`` (command and weights' sha256)``}``
    (``raydist.driver.plan``). Concurrency, output and cache paths are no part of it: they change
    where and how fast, never what."""
    view = {name: value for name, value in view_options.items() if name not in TIMING_OPTIONS}
    settings = {name: value for name, value in agent_settings.items() if name not in KEYLESS_AGENT_SETTINGS}
    return stable_hash({"agent": agent, "settings": settings, "view": view, "environment": dict(environment or {})})


def build_plan(
    instances: Iterable,
    *,
    model: str,
    agent: str,
    levels: Sequence[str],
    seeds: Sequence[int],
    config_hash: str,
) -> list[RunUnit]:
    """Every unit of instances x levels x seeds for one model and agent, in a stable order
    (instance, level, seed). Scripted agents do not use a model, so their units record
    ``model="-"`` and are shared across model sweeps."""
    model_field = "-" if agent in SCRIPTED_AGENTS else model
    return [
        RunUnit(
            instance_id=inst.instance_id,
            instance_hash=inst.content_hash(),
            model=model_field,
            agent=agent,
            level=level,
            seed=int(seed),
            config_hash=config_hash,
        )
        for inst in instances
        for level in levels
        for seed in seeds
    ]


def with_preparation(units: Iterable[RunUnit], options: ViewOptions, model_identity: str) -> list[RunUnit]:
    """``units`` whose level needs preparation (L1, L4: ``raydist.views.levels_needing``) get a
    ``config_hash`` that also covers what decides the prepared record (version, prompt files,
    attempts, view model: ``raydist.cluster.prepare.task_key`` of any instance), so a changed L1
    prompt or a new preparation version runs those units again instead of reusing rows built on
    the old statements or rewrites. Other units are unchanged. ``options`` is the launch's
    ``raydist.views.ViewOptions``."""
    marks: dict[str, list[str]] = {}  # per level: the prompt files are read once, not once per unit
    out = []
    for unit in units:
        if unit.level not in marks:
            marks[unit.level] = [task_key(PrepTask("*", 0, kind), ANY_INSTANCE, options, model_identity)
                                 for kind in sorted(levels_needing(unit.level))]
        if marks[unit.level]:
            unit = replace(unit, config_hash=stable_hash([unit.config_hash, *marks[unit.level]]))
        out.append(unit)
    return out


def plan_units(instances: Sequence, *, model: str, agent: str, levels: Sequence[str], seeds: Sequence[int],
               agent_settings: Mapping, view_options: Mapping, environment: Mapping,
               view_model_identity: str) -> tuple[RunUnit, ...]:
    """Every unit of ``agent`` over ``instances`` x ``levels`` x ``seeds`` (``build_plan``), keyed
    by ``unit_config_hash(agent, agent_settings, view_options, environment)`` and, for levels
    that need preparation, the preparation's fingerprint (``with_preparation``, with the view
    model's identity). ``agent_settings`` and ``view_options`` are the composed config's dicts:
    the key hashes them as written."""
    units = build_plan(instances, model=model, agent=agent, levels=levels, seeds=seeds,
                       config_hash=unit_config_hash(agent, agent_settings, view_options, environment))
    return tuple(with_preparation(units, ViewOptions(**view_options), view_model_identity))
