"""The unit key: every run unit of a launch, with a stable key. The one module that says what
a unit's key hashes (``unit_config``, the preparation marks of ``plan_units``) and builds the units
(``plan_units``); ``raydist.driver.plan`` hands it the checked settings.

A run unit is one (instance, model, agent, level, seed, attempt). Its key hashes everything that
determines its outcome: the instance's content, the model (for a served model, its server
command and the sha256 of its weights), the agent's settings and prompt files' contents, the
level, the seed, the view options, the sandbox's limits, network and base image, the
grading timeout and the grading environment (``raydist.grading.environment``;
``unit_config_hash``), and the attempt (``attempts=k`` runs each view k times;
attempt 0 hashes as a unit did before attempts existed, so ``attempts=3`` after a launch with one
attempt finds its rows and runs only attempts 1 and 2). Re-running the same command therefore finds the same keys,
which is what makes resuming exact; changing a setting that matters yields new keys, so a
stale row is never mistaken for a result of the new configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property

from raydist._util.hashing import stable_hash
from raydist._util.settings import keyless_fields
from raydist.agents.settings import AgentSettings
from raydist.cluster.prepare import ANY_INSTANCE, PrepTask, preparation_keys
from raydist.views import ViewOptions, levels_needing
from raydist.views.base import TIMING_OPTIONS

SCRIPTED_AGENTS = ("oracle", "null")


@dataclass(frozen=True)
class RunUnit:
    """One (instance, model, agent, level, seed, attempt) to run; ``config_hash`` covers the
    settings that change its outcome (agent settings, model settings, view options).
    ``attempt`` (0-based) numbers the independent repetitions of one view (``attempts=k``):
    they share the view and differ only in what the agent and model do."""

    instance_id: str
    instance_hash: str
    model: str
    agent: str
    level: str
    seed: int
    config_hash: str
    attempt: int = 0

    @cached_property
    def key(self) -> str:
        """24 hex chars identifying this unit across launches (stable under re-runs). Computed
        once per object (a sweep asks for it several times per unit in every phase). Attempt 0
        hashes without its ``attempt`` field, as units did before attempts existed."""
        fields = asdict(self)
        if fields["attempt"] == 0:
            del fields["attempt"]
        return stable_hash(fields, 24)


#: Agent settings that cannot change a result: how long one model call may take and how
#: often a transient failure is retried (a call that fails for good is an infrastructure error),
#: as ``raydist.agents.settings.AgentSettings`` marks them (``raydist._util.settings.keyless``).
KEYLESS_AGENT_SETTINGS = keyless_fields(AgentSettings)


def unit_config(agent: str, agent_settings: Mapping, view_options: Mapping,
                environment: Mapping | None = None) -> dict:
    """Everything besides the instance, model, level and seed that can change a unit's result,
    as the plain data its key hashes: the agent's settings (limits, decoding, prompt folder;
    not ``KEYLESS_AGENT_SETTINGS``), the view options (not the view-model timing options,
    ``raydist.views.base.TIMING_OPTIONS``) and ``environment``: what the launch adds, e.g.
    ``{"sandbox": {"limits", "network", "base_image"}, "grading_timeout_s", "grading_env", "prompts"`` (the
    prompt files' digest) ``, "model_server"`` (command and weights' sha256)``}``
    (``raydist.driver.plan``). Concurrency, output and cache paths are no part of it: they
    change where and how fast, never what."""
    view = {name: value for name, value in view_options.items() if name not in TIMING_OPTIONS}
    settings = {name: value for name, value in agent_settings.items() if name not in KEYLESS_AGENT_SETTINGS}
    return {"agent": agent, "settings": settings, "view": view, "environment": dict(environment or {})}


def unit_config_hash(agent: str, agent_settings: Mapping, view_options: Mapping,
                     environment: Mapping | None = None) -> str:
    """The hash of ``unit_config``: a unit's ``config_hash`` for a level without preparation."""
    return stable_hash(unit_config(agent, agent_settings, view_options, environment))


def build_plan(
    instances: Iterable,
    *,
    model: str,
    agent: str,
    levels: Sequence[str],
    seeds: Sequence[int],
    config_hash: str | Mapping[str, str],
    attempts: int = 1,
) -> list[RunUnit]:
    """Every unit of instances x levels x seeds x attempts (``range(attempts)``) for one model
    and agent, in a stable order (instance, level, seed, attempt), with ``config_hash`` (one
    for every level, or one per level). Raises ValueError when ``attempts`` < 1.
    Scripted agents do not use a model, so their units record ``model="-"`` and are shared
    across model sweeps."""
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise ValueError(f"attempts={attempts!r}: give a whole number >= 1")
    model_field = "-" if agent in SCRIPTED_AGENTS else model
    per_level = {level: config_hash for level in levels} if isinstance(config_hash, str) else config_hash
    return [
        RunUnit(
            instance_id=inst.instance_id,
            instance_hash=inst.content_hash(),
            model=model_field,
            agent=agent,
            level=level,
            seed=int(seed),
            config_hash=per_level[level],
            attempt=attempt,
        )
        for inst in instances
        for level in levels
        for seed in seeds
        for attempt in range(attempts)
    ]


@dataclass(frozen=True)
class UnitPlan:
    """The units of one agent (``units``, in plan order) and every view preparation they need
    (L1 statements, L4 rewrites; ``preparations``, in first-use order) with its cache key
    (``raydist.cluster.prepare.task_key``)."""

    units: tuple[RunUnit, ...]
    preparations: Mapping[PrepTask, str]


def plan_units(instances: Sequence, *, model: str, agent: str, levels: Sequence[str], seeds: Sequence[int],
               agent_settings: Mapping, view_options: Mapping, environment: Mapping,
               view_model_identity: str, attempts: int = 1) -> UnitPlan:
    """Every unit of ``agent`` over ``instances`` x ``levels`` x ``seeds`` x ``attempts``, in a
    stable order (instance, level, seed, attempt; ``build_plan``; the attempts of a view share
    its preparations), keyed by ``unit_config(agent, agent_settings,
    view_options, environment)`` and, for a level that needs preparation (L1, L4:
    ``raydist.views.levels_needing``), what decides the prepared record (version, prompt
    files, attempts, view model: ``raydist.cluster.prepare.task_key`` of any instance, with
    ``view_model_identity``), so a changed L1 prompt or a new preparation version runs those
    units again instead of reusing rows built on the old statements or rewrites; and every
    preparation the units need, keyed (``raydist.cluster.prepare.preparation_keys``).
    ``agent_settings`` and ``view_options`` are the composed config's dicts: the key hashes
    them as written. Raises ``FileNotFoundError`` naming a missing view prompt file."""
    config = unit_config(agent, agent_settings, view_options, environment)
    needs = {level: sorted(levels_needing(level)) for level in levels}
    tasks = dict.fromkeys(PrepTask(inst.instance_id, int(seed), kind)
                          for inst in instances for level in levels for seed in seeds for kind in needs[level])
    # A unit's mark of a kind is the key of that kind's preparation of any instance and seed
    # (instance id "": no loaded instance has it, so it names no real preparation).
    any_instance = {kind: PrepTask("", 0, kind) for kinds in needs.values() for kind in kinds}
    keys = preparation_keys([*tasks, *any_instance.values()],
                            {"": ANY_INSTANCE, **{i.instance_id: i for i in instances}},
                            ViewOptions(**view_options), view_model_identity)
    marks = {level: [keys[any_instance[kind]] for kind in kinds] for level, kinds in needs.items()}
    base = stable_hash(config)
    config_hash = {level: stable_hash([base, *mark]) if mark else base for level, mark in marks.items()}
    units = build_plan(instances, model=model, agent=agent, levels=levels, seeds=seeds, config_hash=config_hash,
                       attempts=attempts)
    return UnitPlan(tuple(units), {task: keys[task] for task in tasks})
