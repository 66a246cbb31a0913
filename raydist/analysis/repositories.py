"""SchrodingerRepo's result tables (§V) from the rows of ``raydist.analysis.runs``: Table I
(Pass@1, actions, tokens and cost per model x level against L0, §V-A), Figure 3 (the share
of added actions per category, §V-B) and the case-study data of Figure 4 (§V-E).

A *system* is a ``(model, agent)`` pair: two agents on one model never share a cell. Only
finished units (``resolved`` or ``unresolved``) enter rates and means; the units that ended
in an error are counted apart, per outcome (``raydist.outcomes.ERRORS``). Pass@1 is a
fraction in [0, 1], its change against L0 is in percentage points, the other changes in %
of the L0 value; ``None`` stands for a value that is not defined (said where).
"""

from __future__ import annotations

from fractions import Fraction
from statistics import fmean, stdev

import pyarrow as pa

from raydist.analysis.attempts import attempt_cells, exceeds
from raydist.analysis.runs import (
    BASELINE,
    finished_units,
    level_key,
    levels_against_baseline,
    paired_instances,
    resolved_share,
)
from raydist.outcomes import ERRORS, FINISHED, RESOLVED
from raydist.results.summary import CATEGORIES as ACTION_CATEGORIES

#: The six categories of Figure 3 (§IV RQ2); ``submit`` and ``other`` are reported but get no share.
FIGURE_CATEGORIES = ("navigate", "search", "read", "probe", "edit", "test")
#: Table I's cost columns: mean per finished unit (steps are the actions; tokens; cost in USD).
COST_COLUMNS = ("steps", "input_tokens", "output_tokens", "cost")


def level_table(table: pa.Table) -> list[dict]:
    """Table I: one dict per model x agent x level, sorted by model, agent and ``level_key``.

    ``units`` (rows), ``finished``, ``instances`` (with a finished unit), ``seeds`` (with a
    finished unit); ``pass_at_1``: the mean over those seeds of each seed's resolved share of
    its finished units (the unpaired mean of the cell); ``pass_at_1_std``: their sample
    standard deviation (ddof = 1; None with one seed); ``pass_at_1_all``: the same with every
    unit of the seed in the denominator, an error counted as unresolved, as SWE-bench's
    harness counts it (None without a unit); ``paired`` (instances with a finished unit both
    here and at L0) and ``delta_pp``: the paired Δ, ``100 *`` the mean over those instances of
    the resolved share here minus at L0, percentage points (the Δ of
    ``raydist.analysis.significance.paired_significance``; None without a paired instance);
    over repeated attempts (``raydist.analysis.attempts.cell_attempts``): ``attempts`` (k),
    ``runs`` ((seed, attempt) pairs with a finished unit), ``pass_at_k`` (unbiased, a fraction;
    None when no view has k finished attempts), ``pass_at_k_views``, ``run_sd`` (the run-to-run
    standard deviation of Pass@1, a fraction; None with one attempt), ``noise_floor_pp`` (the
    L0 noise floor of this level's Δ in points: ``raydist.analysis.attempts.noise_floor``; None
    at L0, with one attempt, or without an L0 cell) and ``exceeds_noise_floor`` (|Δ| above it;
    None when either is undefined);
    ``mean_steps``, ``mean_input_tokens``, ``mean_output_tokens``, ``mean_cost`` (USD): means
    over the finished units (a null counts 0), each with ``<name>_change``: ``100 * (x - x_L0)
    / x_L0`` in %. A change is None when the system has no L0 row or the L0 value is 0 (or
    None). ``input_error``, ``infrastructure_error``, ``bug``: units of the cell that ended
    so, in no rate but ``pass_at_1_all`` and in no mean (§V-B's metrics are over runs that
    produced a result)."""
    cells: dict[tuple, list[dict]] = {}
    for row in table.select(["model", "agent", "level", "seed", "attempt", "instance_id", "outcome",
                             *COST_COLUMNS]).to_pylist():
        cells.setdefault((row["model"], row["agent"], row["level"]), []).append(row)
    rows = [_cell(model, agent, level, units) for (model, agent, level), units in cells.items()]
    baselines = {(r["model"], r["agent"]): r for r in rows if r["level"] == BASELINE}
    systems = finished_units(table)
    noise = attempt_cells(unit for units in cells.values() for unit in units)
    for row in rows:
        _add_changes(row, baselines.get((row["model"], row["agent"])))
        row["paired"], row["delta_pp"] = _paired_delta(systems.get((row["model"], row["agent"]), {}), row["level"])
        stats = noise[(row["model"], row["agent"], row["level"])]
        row |= {"attempts": stats["attempts"], "runs": stats["runs"], "pass_at_k": stats["pass_at_k"],
                "pass_at_k_views": stats["pass_at_k_views"], "run_sd": stats["run_sd"],
                "noise_floor_pp": None if stats["noise_floor"] is None else 100 * stats["noise_floor"]}
        row["exceeds_noise_floor"] = exceeds(row["delta_pp"], row["noise_floor_pp"])
    return sorted(rows, key=lambda r: (r["model"], r["agent"], level_key(r["level"])))


def _cell(model: str, agent: str, level: str, units: list[dict]) -> dict:
    done = [u for u in units if u["outcome"] in FINISHED]
    seeds: dict[int, list[bool]] = {}
    every: dict[int, list[bool]] = {}
    for unit in units:
        every.setdefault(unit["seed"], []).append(unit["outcome"] == RESOLVED)
        if unit["outcome"] in FINISHED:
            seeds.setdefault(unit["seed"], []).append(unit["outcome"] == RESOLVED)
    pass_at_1 = [fmean(verdicts) for _, verdicts in sorted(seeds.items())]
    return {
        "model": model, "agent": agent, "level": level, "units": len(units), "finished": len(done),
        "instances": len({u["instance_id"] for u in done}), "seeds": len(pass_at_1),
        "pass_at_1": fmean(pass_at_1) if pass_at_1 else None,
        "pass_at_1_std": stdev(pass_at_1) if len(pass_at_1) > 1 else None,
        "pass_at_1_all": fmean(fmean(v) for _, v in sorted(every.items())) if every else None,
        **{f"mean_{c}": fmean(u[c] or 0 for u in done) if done else None for c in COST_COLUMNS},
        **{outcome: sum(u["outcome"] == outcome for u in units) for outcome in ERRORS},
    }


def _paired_delta(by_level: dict, level: str) -> tuple[int, float | None]:
    """``(paired instances, paired Δ in points)`` of ``level`` against L0 (None when none is paired)."""
    instances = paired_instances(by_level, level)
    if not instances:
        return 0, None
    return len(instances), 100 * fmean(resolved_share(by_level[level][i]) - resolved_share(by_level[BASELINE][i])
                                       for i in instances)


def _add_changes(row: dict, base: dict | None) -> None:
    for column in COST_COLUMNS:
        x, x0 = row[f"mean_{column}"], None if base is None else base[f"mean_{column}"]
        row[f"mean_{column}_change"] = 100 * (x - x0) / x0 if x is not None and x0 else None


def added_action_shares(table: pa.Table) -> list[dict]:
    """Figure 3: per model x agent x level other than L0, where the actions a level adds go.

    On the ``instances`` paired with L0 (a finished unit at both), ``mean_<c>`` is the mean
    over those instances of each instance's mean ``actions_<c>`` over its finished units (a
    null counts 0) and ``added_<c> = mean_<c>(level) - mean_<c>(L0)``, actions per instance,
    for every category of the taxonomy, computed in exact fractions of the integer counts (so
    a change that nets out is 0, not a rounding residue) and given as floats; ``added_total``
    sums the six ``FIGURE_CATEGORIES`` (the net change). A share is a part of the gross added
    actions: ``share_<c> = max(added_<c>, 0) / sum of the positive added_<c>`` over the six, in
    [0, 1], summing to 1; a category that fell has share 0 and shows as its negative
    ``added_<c>``. When the level added no actions overall (``added_total <= 0``, exactly),
    there is nothing to share out and every ``share_<c>`` is None. Levels with no paired
    instance are left out. Sorted by model, agent, ``level_key``."""
    out = []
    for model, agent, level, by_level, instances in levels_against_baseline(table):
        base, here = _mean_actions(by_level[BASELINE], instances), _mean_actions(by_level[level], instances)
        added = {c: here[c] - base[c] for c in ACTION_CATEGORIES}
        total = sum(added[c] for c in FIGURE_CATEGORIES)
        gross = sum(max(added[c], Fraction(0)) for c in FIGURE_CATEGORIES)
        out.append({"model": model, "agent": agent, "level": level, "instances": len(instances),
                    **{f"added_{c}": float(added[c]) for c in ACTION_CATEGORIES}, "added_total": float(total),
                    **{f"share_{c}": float(max(added[c], Fraction(0)) / gross) if total > 0 else None
                       for c in FIGURE_CATEGORIES}})
    return out


def _mean_actions(units: dict[str, list[dict]], instances: list[str]) -> dict[str, Fraction]:
    """Per category: the mean over ``instances`` of the mean actions of each one's units, exact."""
    return {c: sum((Fraction(sum(int(u[f"actions_{c}"] or 0) for u in units[i]), len(units[i])) for i in instances),
                   Fraction(0)) / len(instances) for c in ACTION_CATEGORIES}


def case_study(table: pa.Table, model: str, agent: str | None = None) -> dict:
    """The case study of Figure 4 (§V-E) for one system: one instance at L0 and at every other
    level, side by side.

    The instance is the first (by id) of those paired between L0 and the highest level
    (``level_key``) that every L0 unit resolved and no unit at the highest level did; when
    there is none, the one whose mean ``steps`` grew most from L0 to the highest level (the
    first by id on a tie). Returns ``{"model", "agent", "instance_id", "highest_level",
    "reason", "units"}``, ``units`` one dict per finished unit of the instance (L0 first, then
    by level and seed): ``level, seed, resolved, steps, actions`` (``{category: count}``, all
    categories) and ``model_patch``.

    Raises ValueError naming the choices when ``model`` (with ``agent``, needed when the model
    ran under several agents) has no finished unit, or no instance is paired between L0 and
    a transformed level."""
    (model, agent), by_level = _one_system(finished_units(table), model, agent)
    levels = [level for level in by_level if level != BASELINE and paired_instances(by_level, level)]
    if BASELINE not in by_level or not levels:
        raise ValueError(f"{model} / {agent}: no instance has a finished unit both at {BASELINE} and at a "
                         f"transformed level (levels with finished units: {', '.join(by_level)})")
    highest = levels[-1]
    instance, reason = _case_instance(by_level[BASELINE], by_level[highest], paired_instances(by_level, highest))
    units = [{"level": level, "seed": u["seed"], "resolved": u["outcome"] == RESOLVED, "steps": u["steps"],
              "actions": {c: u[f"actions_{c}"] for c in ACTION_CATEGORIES}, "model_patch": u["model_patch"]}
             for level in by_level for u in by_level[level].get(instance, [])]
    return {"model": model, "agent": agent, "instance_id": instance, "highest_level": highest,
            "reason": reason.format(highest=highest), "units": units}


def _one_system(systems: dict, model: str, agent: str | None) -> tuple[tuple[str, str], dict]:
    matches = [s for s in systems if s[0] == model and agent in (None, s[1])]
    if len(matches) != 1:
        known = ", ".join(f"{m} / {a}" for m, a in systems) or "none"
        raise ValueError(f"model {model!r}{'' if agent is None else f' with agent {agent!r}'} matches "
                         f"{len(matches)} systems with finished units; the systems are: {known}")
    return matches[0], systems[matches[0]]


def _case_instance(base: dict, highest: dict, instances: list[str]) -> tuple[str, str]:
    for instance in instances:
        if resolved_share(base[instance]) == 1 and resolved_share(highest[instance]) == 0:
            return instance, f"resolved at {BASELINE}, not at {{highest}}"
    growth = {i: fmean(u["steps"] or 0 for u in highest[i]) - fmean(u["steps"] or 0 for u in base[i])
              for i in instances}
    instance = max(instances, key=growth.__getitem__)
    reason = f"no instance resolved at {BASELINE} and not at {{highest}}; largest step growth"
    return instance, f"{reason} ({growth[instance]:+g} steps)"
