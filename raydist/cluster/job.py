"""One launch as data: the ``Job`` the driver plans from the checked settings
(``raydist.driver.plan.plan_job``) and hands whole to the executor
(``raydist.cluster.execute.execute_job``). Frozen; nothing here starts anything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raydist._util.storage import JsonCache, Storage
from raydist.cluster.prepare import PrepTask
from raydist.cluster.scheduler import RayOptions
from raydist.cluster.served import ServedModel
from raydist.cluster.unit_image import UnitSettings
from raydist.cluster.unit_key import RunUnit
from raydist.models.admission import Budget
from raydist.outcomes import RetryPolicy
from raydist.tasks import Instance


@dataclass(frozen=True)
class GatePlan:
    """The validity gate's oracle and null units over the launch's views, the settings of
    each scripted agent, the run directory their rows share across launches and where that
    directory is mirrored (None: no ``storage``)."""

    units: tuple[RunUnit, ...]
    settings: Mapping[str, UnitSettings]
    store_dir: Path
    mirror: Storage | None = None


@dataclass(frozen=True)
class Job:
    """One launch: the units (in plan order), their instances by id, the settings of every
    phase, the models it serves, and where its rows and caches go."""

    units: tuple[RunUnit, ...]
    instances: Mapping[str, Instance]
    settings: UnitSettings
    ray: RayOptions
    agent: str
    model: ServedModel  # the agent's model; ``local`` None for hosted models and scripted agents
    view_model: ServedModel
    run_dir: Path
    title: str
    views_cache: JsonCache  # L1/L4 preparation records by ``preparations``' keys (``raydist.cluster.prepare``)
    preparations: Mapping[PrepTask, str] = field(default_factory=dict)  # every L1/L4 preparation of the
    # agent's and the gate's units, with its cache key (``raydist.cluster.prepare.preparation_keys``)
    retry: RetryPolicy = RetryPolicy()  # what runs again (``resume``)
    gate: GatePlan | None = None  # None: not gated (scripted agents, gate=false, or questions)
    judge: ServedModel | None = None  # the judge of repository answers; None: no question in the launch
    keys_unknown: str = ""  # a dry run without a model's weights: why the unit keys are not a run's
    budget: Budget = Budget()  # what this launch may spend on model calls (no bound by default)
    storage: str | None = None  # ``storage=`` (``raydist._util.storage``); None: the driver's disk only
    mirror: Storage | None = None  # where ``run_dir`` is mirrored (``storage``'s copy); None: no storage
    benchmark: str = ""  # the benchmark's name (``benchmark.name``)
    output_root: Path = Path("runs")
