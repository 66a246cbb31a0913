"""The plan: every run unit of a launch, with a stable key.

A run unit is one (instance, model, agent, level, seed). Its key hashes everything that
determines its outcome: the instance's content, the model, the agent's settings, the level,
the seed and the view options. Re-running the same command therefore finds the same keys,
which is what makes resuming exact; changing a setting that matters yields new keys, so a
stale row is never mistaken for a result of the new configuration.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

SCRIPTED_AGENTS = ("oracle", "null")


def stable_hash(value: Any, length: int = 16) -> str:
    """Hex digest (``length`` chars) of the canonical JSON of ``value`` (sorted keys)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


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

    @property
    def key(self) -> str:
        """24 hex chars identifying this unit across launches (stable under re-runs)."""
        return stable_hash(asdict(self), 24)


def expand_levels(levels: str | Sequence[str], implemented: Sequence[str]) -> list[str]:
    """Resolve the ``levels`` setting.

    ``levels`` is a list of level names (``L0``, ``L3``, ``L1+L3``...) or the word
    ``implemented``, meaning every registered level. Raises ``ValueError`` naming an
    unknown level and listing the known ones, before any unit runs.
    """
    if isinstance(levels, str):
        if levels == "implemented":
            return list(implemented)
        levels = [levels]
    out = []
    for level in levels:
        unknown = [part for part in str(level).split("+") if part not in implemented]
        if unknown:
            raise ValueError(
                f"levels: unknown level {unknown[0]!r} in {level!r}; implemented levels are "
                f"{', '.join(implemented)} (compose with '+', e.g. L0+L3)"
            )
        out.append(str(level))
    return out


def unit_config_hash(agent: str, agent_settings: Mapping, view_options: Mapping) -> str:
    """Hash of the settings that matter for a unit's outcome (not concurrency, paths...);
    the view-model timing options (``raydist.views.base.TIMING_OPTIONS``) are left out."""
    from raydist.views.base import TIMING_OPTIONS

    view = {name: value for name, value in view_options.items() if name not in TIMING_OPTIONS}
    return stable_hash({"agent": agent, "settings": dict(agent_settings), "view": view})


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
