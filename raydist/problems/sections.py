"""The DyCodeEval part of a report over finished problems launches, as sections a page can lay
out: each a titled table (plain rows, for HTML, Markdown or CSV), a plotly figure and notes.

    problems_sections(paths) -> [Section, ...]

From each problems run directory at or below ``paths`` (its ``variants.parquet``,
``completions.parquet`` and ``scenarios.json``), in this order:

1. pass@k on the seeds and on the variants beside DyPass@k, per model, with intervals
   (§5, Table 2; ``raydist.problems.tables.pass_table``), one section per run directory;
2. static vs dynamic Pass@1 with the least-squares line, its 95% prediction band and the
   models outside it (§4.3, Figure 5; ``raydist.analysis.contamination``), one section per seed
   dataset over every run directory of it (a point per model and run directory);
3. diversity of the accepted variants beside the rule-based baselines (§4.4), per run
   directory (``diversity=False`` leaves it out: it loads the MiniLM model);
4. collisions over the M runs of each seed against Theorems 3.1-3.3 (§3.3), per run directory;
5. the stability of Pass@1 over the R generated datasets (§4.5, Figure 6), per run directory.

The numbers of 4 and 5 are those of the launch's own summary (``raydist.problems.summary``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from raydist.analysis import problems_figures as figures
from raydist.analysis.contamination import contamination_fit
from raydist.analysis.diversity import diversity_table
from raydist.problems.config import BASELINES
from raydist.problems.report import diversity_rows
from raydist.problems.summary import collision_numbers, stability_numbers
from raydist.problems.tables import (
    ProblemRun,
    load_problem_run,
    pass_table,
    score_points,
)
from raydist.results.report import find_run_dirs

__all__ = ["Section", "problems_sections"]


@dataclass(frozen=True)
class Section:
    """One section of the report.

    ``key``: a stable identifier (letters, digits, ``-``), unique within one call;
    ``title``; ``spec``: the part of DyCodeEval it reproduces (``"§5, Table 2"``);
    ``columns``: the keys of ``rows`` in display order; ``rows``: plain values (str, int,
    float, None; scores as fractions in [0, 1]); ``figure``: a ``plotly.graph_objects.Figure``
    or None; ``notes``: sentences to print under the title; ``data``: the object the rows
    come from (a ``ContaminationFit``, the collision or stability numbers), or None.
    """

    key: str
    title: str
    spec: str
    columns: tuple[str, ...]
    rows: tuple[dict, ...]
    figure: object | None = None
    notes: tuple[str, ...] = ()
    data: object | None = None

    def markdown(self) -> str:
        """The section as Markdown: a heading, the notes, the table (three decimals)."""
        def cell(value) -> str:
            return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
        lines = [f"## {self.title} ({self.spec})", "", *(f"{n}\n" for n in self.notes)]
        lines += ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(cell(r.get(c)) for c in self.columns) + " |" for r in self.rows]
        return "\n".join(lines) + "\n"


def problems_sections(paths: Iterable[str | Path], *, ks: Sequence[int] = (1,), confidence: float = 0.95,
                      diversity: bool = True, embedder=None, baselines: Sequence[str] = BASELINES) -> list[Section]:
    """The sections of the problems run directories at or below ``paths`` (module docstring).

    ``ks``: the k of pass@k and DyPass@k (the figures show the first); ``confidence``: of every
    interval and of the prediction band; ``embedder``: for the diversity section
    (``raydist.analysis.diversity.Embedder``; the packaged MiniLM by default); ``baselines``:
    the rule-based perturbations beside DyCodeEval's variants.

    Raises ``ValueError`` naming ``paths`` when no problems run directory is found there, and
    ``MissingExtra`` without the analysis extra (scipy, plotly; sacrebleu and the MiniLM
    model for the diversity section).
    """
    paths = [Path(p) for p in paths]
    runs = [load_problem_run(d) for d in find_run_dirs(paths)[1]]
    if not runs:
        raise ValueError(f"no problems run directory (variants.parquet beside summary.md) at or below "
                         f"{', '.join(map(str, paths))}")
    tables = {run.run_dir: pass_table(run.completions, ks, confidence) for run in runs}
    out = [_pass_section(run, tables[run.run_dir], ks) for run in runs]
    for dataset in sorted({run.dataset for run in runs}):
        out.append(_contamination_section([r for r in runs if r.dataset == dataset], tables, dataset, confidence))
    if diversity:
        out += [_diversity_section(run, baselines, embedder) for run in runs]
    out += [_collision_section(run) for run in runs]
    out += [_stability_section(run, confidence) for run in runs]
    return out


def _name(run: ProblemRun) -> str:
    return f"{run.dataset}, variants by {run.generator}"


def _key(*parts: str) -> str:
    return "-".join("".join(c if c.isalnum() else "-" for c in p).strip("-") for p in parts)


def _pass_section(run: ProblemRun, table: list[dict], ks: Sequence[int]) -> Section:
    columns = ["model", "seeds", "variants", "variant_seeds"]
    for k in ks:
        for key in (f"pass@{k}", f"variant_pass@{k}", f"DyPass@{k}", f"delta@{k}"):
            columns += [key, f"{key}_low", f"{key}_high"]
    notes = ((f"pass@k on the seed problems (static), on each variant as a problem of its own, and DyPass@k over "
              f"each seed's variants; delta is DyPass@k minus pass@k on the seeds that have both. Intervals: "
              f"Student t over problems, clipped to the score's range. Run directory: {run.run_dir}."),)
    if not table:
        notes += ("No model was evaluated in this run directory.",)
    return Section(_key("pass", str(run.run_dir)), f"pass@k and DyPass@k: {_name(run)}", "DyCodeEval §5, Table 2",
                   tuple(columns), tuple(table), figures.pass_figure(table, ks[0]) if table else None, notes)


def _contamination_section(runs: list[ProblemRun], tables: dict, dataset: str, confidence: float) -> Section:
    points: dict[str, tuple[float, float]] = {}
    for run in runs:
        for model, point in score_points(tables[run.run_dir]).items():
            label = model if len(runs) == 1 else f"{model} ({run.generator}, {run.run_dir.name})"
            points[label] = point
    columns = ("model", "static", "dynamic", "predicted", "band_low", "band_high", "outside")
    pct = round(confidence * 100)
    title, spec = f"Static vs dynamic Pass@1: {dataset}", "DyCodeEval §4.3, Figure 5"
    if len(points) < 3 or len({x for x, _ in points.values()}) < 2:
        rows = tuple({"model": m, "static": x, "dynamic": y} for m, (x, y) in points.items())
        why = (f"The fit needs at least 3 models with pass@1 and DyPass@1 and two different static scores; "
               f"{len(points)} here.")
        return Section(_key("contamination", dataset), title, spec, columns, rows,
                       figures.contamination_figure(points), (why,))
    fit = contamination_fit(points, confidence)
    rows = tuple({"model": p.name, "static": p.static, "dynamic": p.dynamic, "predicted": p.predicted,
                  "band_low": p.low, "band_high": p.high, "outside": p.side} for p in fit.points)
    named = ", ".join(f"{p.name} ({p.side})" for p in fit.points if p.outlier) or "none"
    notes = ((f"Least squares over {fit.n} models: dynamic = {fit.intercept:.3f} + {fit.slope:.3f} x static, "
              f"r = {fit.r:.3f}, residual std {fit.residual_std:.3f}. Outside the {pct}% prediction band: {named}. "
              "A model below the band scores higher on the seed problems than its score on their variants "
              "predicts: a sign of contamination. The band is fitted on every model, outliers included, so "
              "with few models an outlier may stay inside it."),)
    return Section(_key("contamination", dataset), title, spec, columns, rows,
                   figures.contamination_figure(points, fit), notes, fit)


def _accepted(run: ProblemRun) -> list[dict]:
    return [v for v in run.variants if v["accepted"] and v.get("canonical_passed")]


def _diversity_section(run: ProblemRun, baselines: Sequence[str], embedder) -> Section:
    seeds = {v["seed_id"]: (v["seed_id"], v["seed_prompt"], v["entry_point"]) for v in run.variants}
    table = diversity_table(diversity_rows(list(baselines), list(seeds.values()),
                                           [(v["seed_id"], v["prompt"]) for v in _accepted(run)]), embedder)
    columns = ("method", "seeds", "variants", "external_bleu4", "external_semantic", "internal_bleu4",
               "internal_semantic")
    notes = (("Similarity of each variant to its seed (external) and between the variants of one seed "
              "(internal): BLEU-4 and the cosine of MiniLM embeddings; lower means more diverse."),)
    return Section(_key("diversity", str(run.run_dir)), f"Diversity: {_name(run)}", "DyCodeEval §4.4",
                   columns, tuple(table), figures.diversity_figure(table), notes)


def _collision_section(run: ProblemRun) -> Section:
    pool = run.pool if run.pool is not None else len({v["scenario"] for v in run.variants})
    numbers = collision_numbers(list(run.variants), pool)
    columns = ("outcome", "seeds", "repeat_rate", "repeat_exact", "repeat_bound", "collision_rate",
               "collision_exact", "collision_bound", "dataset_collision_rate", "dataset_collision_exact")
    notes = ((f"M = {numbers['runs']} runs per seed problem, scenario pool |S| = {pool}; the theorems with "
              "N = |S| (for rewritten problems an upper bound: contexts only enlarge the space)."),)
    return Section(_key("collision", str(run.run_dir)), f"Collisions over M runs: {_name(run)}",
                   "DyCodeEval §3.3, Theorems 3.1-3.3", columns, tuple(numbers["rows"]),
                   figures.collision_figure(numbers), notes, numbers)


def _stability_section(run: ProblemRun, confidence: float) -> Section:
    numbers = stability_numbers(list(run.variants), list(run.completions), confidence)
    generations = sorted({g for m in numbers.values() for g in m["datasets"]})
    rows = tuple({"model": model, "R": m["R"], "mean": m["mean"], "std": m["std"], "ci_low": m["ci_low"],
                  "ci_high": m["ci_high"], **{f"dataset {g}": m["datasets"][g]["pass@1"] if g in m["datasets"]
                                               else None for g in generations}}
                 for model, m in numbers.items())
    columns = ("model", "R", "mean", "std", "ci_low", "ci_high", *(f"dataset {g}" for g in generations))
    notes = ((f"Pass@1 of each model on each generated dataset (generation seed g of every seed problem), their "
              f"mean ± sample std and the {round(confidence * 100)}% t interval of the mean."),)
    return Section(_key("stability", str(run.run_dir)), f"Stability over generated datasets: {_name(run)}",
                   "DyCodeEval §4.5, Figure 6", columns, rows, figures.stability_figure(numbers), notes, numbers)
