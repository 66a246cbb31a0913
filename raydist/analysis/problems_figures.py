"""The figures of DyCodeEval's evaluation as plotly figures, from the numbers of
:mod:`raydist.analysis.problems` and the launch's own analyses (diversity, collisions,
stability). Each builder takes plain rows or dicts and returns a ``plotly.graph_objects.Figure``
(``fig.to_html(include_plotlyjs=...)`` embeds it in a page, ``fig.to_dict()`` is its data);
scores are fractions in [0, 1]. plotly comes with the analysis extra (``MissingExtra``
otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from raydist._util.extras import require
from raydist.analysis import collision as col

__all__ = ["collision_figure", "contamination_figure", "diversity_figure", "pass_figure", "stability_figure"]

_SCORE_AXIS = {"range": [0, 1.05], "tickformat": ".0%"}


def _go():
    return require("plotly.graph_objects", "analysis", "a DyCodeEval figure")


def _error(rows: Sequence[Mapping], key: str) -> dict:
    """Asymmetric error bars from ``key_low`` / ``key_high`` (0 where the interval is None)."""
    def gap(r, side):
        bound = r.get(f"{key}_{side}")
        return 0.0 if bound is None or r.get(key) is None else abs(r[key] - bound)
    return {"type": "data", "symmetric": False, "array": [gap(r, "high") for r in rows],
            "arrayminus": [gap(r, "low") for r in rows]}


def pass_figure(table: Sequence[Mapping], k: int = 1, title: str = "") -> object:
    """§5, Table 2 as bars: per model (x), pass@k on the seeds, pass@k on the variants and
    DyPass@k, each with its interval (``raydist.analysis.problems.pass_table`` rows). A
    missing value is a missing bar."""
    go = _go()
    models = [r["model"] for r in table]
    fig = go.Figure()
    for key, name in ((f"pass@{k}", f"pass@{k} (seeds)"), (f"variant_pass@{k}", f"pass@{k} (variants)"),
                      (f"DyPass@{k}", f"DyPass@{k}")):
        fig.add_trace(go.Bar(name=name, x=models, y=[r.get(key) for r in table], error_y=_error(table, key)))
    fig.update_layout(barmode="group", title=title or f"pass@{k} on seeds and variants, DyPass@{k} (§5)",
                      yaxis={**_SCORE_AXIS, "title": "score"}, xaxis={"title": "model"})
    return fig


def contamination_figure(points: Mapping[str, tuple[float, float]], fit=None, title: str = "") -> object:
    """§4.3, Figure 5: each model's static score (x, pass@1 on the seeds) against its dynamic
    score (y, DyPass@1), named; with ``fit`` (``ContaminationFit``) the least-squares line, its
    prediction band as a shaded area and the outliers in red. Without a fit (fewer than 3
    models) the diagonal y = x stands for "the same score either way"."""
    go = _go()
    fig = go.Figure()
    if fit is not None:
        xs = [b[0] for b in fit.band]
        pct = round(fit.confidence * 100)
        fig.add_trace(go.Scatter(x=xs, y=[b[3] for b in fit.band], mode="lines", line={"width": 0},
                                 showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=xs, y=[b[2] for b in fit.band], mode="lines", line={"width": 0}, fill="tonexty",
                                 fillcolor="rgba(99,110,250,0.15)", name=f"{pct}% prediction band"))
        fig.add_trace(go.Scatter(x=xs, y=[b[1] for b in fit.band], mode="lines", line={"color": "rgb(99,110,250)"},
                                 name=f"fit: y = {fit.intercept:.3f} + {fit.slope:.3f}x (r = {fit.r:.3f})"))
        outside = set(fit.outliers)
    else:
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "grey"},
                                 name="y = x"))
        outside = set()
    for label, names, colour in (("models", [n for n in points if n not in outside], "rgb(40,40,40)"),
                                 ("outside the band", [n for n in points if n in outside], "rgb(214,39,40)")):
        if names:
            fig.add_trace(go.Scatter(x=[points[n][0] for n in names], y=[points[n][1] for n in names],
                                     mode="markers+text", text=names, textposition="top center",
                                     marker={"size": 10, "color": colour}, name=label))
    fig.update_layout(title=title or "Static vs dynamic Pass@1 (§4.3, Figure 5)",
                      xaxis={**_SCORE_AXIS, "title": "static: pass@1 on the seed problems"},
                      yaxis={**_SCORE_AXIS, "title": "dynamic: DyPass@1 on the variants"})
    return fig


def diversity_figure(rows: Sequence[Mapping], title: str = "") -> object:
    """§4.4's table as bars: per method (x: DyCodeEval and each rule-based baseline),
    external and internal BLEU-4 and semantic similarity
    (``raydist.analysis.diversity.diversity_table`` rows). Lower means more diverse."""
    go = _go()
    methods = [r["method"] for r in rows]
    fig = go.Figure()
    for key, name in (("external_bleu4", "BLEU-4 to the seed"), ("external_semantic", "semantic, to the seed"),
                      ("internal_bleu4", "BLEU-4 between variants"),
                      ("internal_semantic", "semantic, between variants")):
        fig.add_trace(go.Bar(name=name, x=methods, y=[r.get(key) for r in rows]))
    fig.update_layout(barmode="group", title=title or "Diversity: similarity to the seed and between variants "
                      "(§4.4; lower = more diverse)", yaxis={"range": [0, 1.05], "title": "similarity"},
                      xaxis={"title": "method"})
    return fig


def collision_figure(numbers: Mapping, title: str = "") -> object:
    """§3.3: Theorem 3.1's repeat and 3.2's collision probability (exact, and 3.2's bound)
    over 2..max(10, 2M) runs for N = |S| outcomes, with the rates observed over the launch's
    M runs (``raydist.problems.summary.collision_numbers``) as markers at M. Needs
    ``numbers["rows"]`` (M >= 2); an empty figure with a note otherwise."""
    go = _go()
    fig = go.Figure()
    runs, pool = numbers["runs"], numbers["pool"]
    if not numbers["rows"]:
        fig.add_annotation(text=f"needs at least 2 runs per seed problem; this launch has {runs}", showarrow=False)
        return fig.update_layout(title=title or "Collisions over M runs (§3.3)")
    ms = list(range(2, max(10, 2 * runs) + 1))
    for name, fn, dash in (("repeat, exact (Theorem 3.1)", col.repeat_probability, "solid"),
                           ("collision, exact (Theorem 3.2)", col.collision_probability, "solid"),
                           ("collision, bound (Theorem 3.2)", col.collision_bound, "dot")):
        fig.add_trace(go.Scatter(x=ms, y=[min(1.0, fn(pool, 1, m)) for m in ms], mode="lines", name=name,
                                 line={"dash": dash}))
    for row in numbers["rows"]:
        for key, what, symbol in (("repeat_rate", "repeat", "circle"), ("collision_rate", "collision", "x")):
            if row[key] is not None:
                fig.add_trace(go.Scatter(x=[runs], y=[row[key]], mode="markers", marker={"size": 11, "symbol": symbol},
                                         name=f"observed {what}: {row['outcome']} ({row['seeds']} seeds)"))
    fig.update_layout(title=title or f"Collisions over M runs, |S| = {pool} scenarios (§3.3)",
                      xaxis={"title": "runs per seed problem (M)"}, yaxis={"range": [0, 1.05], "title": "probability"})
    return fig


def stability_figure(numbers: Mapping, title: str = "") -> object:
    """§4.5, Figure 6: per model (x), Pass@1 on each generated dataset (grey points) and their
    mean ± sample std (``raydist.problems.summary.stability_numbers``); a model with fewer
    than 2 datasets shows its points only."""
    go = _go()
    fig = go.Figure()
    models = list(numbers)
    fig.add_trace(go.Scatter(x=[m for m in models for _ in numbers[m]["datasets"]],
                             y=[d["pass@1"] for m in models for d in numbers[m]["datasets"].values()],
                             mode="markers", marker={"color": "rgba(120,120,120,0.6)", "size": 8},
                             name="Pass@1 of one generated dataset"))
    spread = [m for m in models if numbers[m]["mean"] is not None]
    fig.add_trace(go.Scatter(x=spread, y=[numbers[m]["mean"] for m in spread], mode="markers",
                             marker={"size": 13, "symbol": "diamond"}, name="mean ± std",
                             error_y={"type": "data", "array": [numbers[m]["std"] for m in spread]}))
    fig.update_layout(title=title or "Stability of Pass@1 over generated datasets (§4.5, Figure 6)",
                      yaxis={**_SCORE_AXIS, "title": "Pass@1"}, xaxis={"title": "model"})
    return fig
