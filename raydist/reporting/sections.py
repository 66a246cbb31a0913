"""The analysis report of run directories (SchrodingerRepo §V, and DyCodeEval §4.3-§5 for
problems runs through ``raydist.problems.sections``): what was read and what is
missing, Table I, the paired tests against L0, Figure 3, verdict stability with its power
note, and the case study of Figure 4, as ``Section`` values that ``raydist.reporting._render``
writes as one self-contained HTML file, Markdown and one CSV per table.

    sections = repository_sections(["runs/builtin"])     # list[Section]
    write_report(sections, "runs/builtin/report")         # {"html": Path, "markdown": Path, "csv": [Path]}

Every number comes from ``raydist.analysis.repositories`` and ``raydist.analysis.significance``
(which say how each is computed); this module only chooses columns, units and words. A cell
that is not defined is written "-" in the HTML and Markdown and left empty in the CSV.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from raydist._util.extras import MissingExtra, require
from raydist._util.files import atomic_write_text
from raydist._util.run_dirs import GATE_DIR
from raydist.analysis.contracts import contract_risk
from raydist.analysis.questions import question_table, split_questions
from raydist.analysis.repositories import FIGURE_CATEGORIES, added_action_shares, case_study, level_table
from raydist.analysis.runs import BASELINE, finished_units, load_runs, short_cells, unfinished_run_dirs
from raydist.analysis.significance import paired_significance, verdict_stability
from raydist.problems.sections import problems_sections
from raydist.qa.judge import DIMENSIONS
from raydist.reporting._render import render_csv, render_html, render_markdown
from raydist.results.report import find_run_dirs
from raydist.results.schema import INTEGRITY_CATEGORIES
from raydist.results.summary import CATEGORIES as ACTION_CATEGORIES
from raydist.results.summary import integrity_counts


@dataclass(frozen=True)
class Section:
    """One part of the report: an ``id`` (the HTML element's id and the CSV's name), a
    ``title``, ``text`` (paragraphs of plain text, shown above the table), a table
    (``columns`` and ``rows``: raw values, None for "not defined"; ``formats``: per column a
    ``str.format`` spec for the HTML and Markdown, e.g. ``"{:.1f}"``), an optional plotly
    figure (a ``plotly.graph_objects.Figure``) and ``blocks``: ``(caption, preformatted text)``
    pairs such as patches."""

    id: str
    title: str
    text: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    rows: tuple[tuple, ...] = ()
    formats: dict = field(default_factory=dict)
    figure: object = None
    blocks: tuple[tuple[str, str], ...] = ()


PCT, PP, P3, NUM = "{:.1f}", "{:+.1f}", "{:.3g}", "{:.1f}"


def repository_sections(paths: Iterable[str | Path], *, seed: int = 0, diversity: bool = True) -> list[Section]:
    """The report of every main-job run directory at or below ``paths`` (as ``raydist report``
    finds them), in reading order; then, for the problems run directories (DyCodeEval) found
    there, the sections of ``raydist.problems.sections.problems_sections`` (``diversity=False``
    leaves out the diversity section, which loads the MiniLM model).

    Raises ValueError (from ``raydist.analysis.runs.load_runs``) naming the path when nothing
    can be read: no path, no ``runs.parquet``, a broken file, or one unit in two directories."""
    paths = [Path(p) for p in paths]
    run_dirs, problems_dirs = find_run_dirs(paths)
    # The validity gate's oracle and null runs (<benchmark>/_gate) are read only when named.
    run_dirs = [d for d in run_dirs if d.name != GATE_DIR or d in paths]
    sections = []
    if run_dirs or not problems_dirs:
        compiled = [d / "runs.parquet" for d in run_dirs if (d / "runs.parquet").is_file()]
        table = load_runs(compiled or paths)
        unfinished = [d for d in unfinished_run_dirs(paths) if d in run_dirs]
        patches, questions = split_questions(table)
        sections.append(_sources(table, unfinished, patches))
        if patches.num_rows or not questions.num_rows:
            sections += [_table_i(patches), _integrity(patches), _significance(patches, seed), _figure_3(patches),
                         _stability(patches), *_case_studies(patches), *_contracts(patches)]
        if questions.num_rows:
            sections.append(_questions(questions))
    if problems_dirs:
        sections += _problems(problems_dirs, diversity)
    return sections


def _problems(problems_dirs: Sequence[Path], diversity: bool) -> list[Section]:
    """DyCodeEval's tables and figures (§4.3-§5: pass@k and DyPass@k, the contamination fit,
    diversity, collisions, stability) from ``raydist.problems.sections``, laid out as sections."""
    return [Section(id=f"problems-{s.key}", title=f"{s.title} ({s.spec})", text=tuple(s.notes),
                    columns=tuple(s.columns), rows=tuple(tuple(r.get(c) for c in s.columns) for r in s.rows),
                    figure=s.figure)
            for s in problems_sections(problems_dirs, diversity=diversity)]


def _sources(table, unfinished: Sequence[Path], patches) -> Section:
    """What was read, and what is missing: cells short of instances (patch tasks), stopped launches."""
    dirs = sorted(set(table.column("run_dir").to_pylist()))
    short = short_cells(patches)
    text = [f"{table.num_rows} units from {len(dirs)} run directories: {', '.join(dirs)}."]
    if unfinished:
        text.append(f"Not read, no runs.parquet (a stopped launch; run it again to compile its rows): "
                    f"{', '.join(map(str, unfinished))}.")
    text.append("Every cell below with fewer finished instances than its system has: rates and tests use the "
                "finished units only." if short else "No cell is missing a finished instance.")
    rows = tuple((c["model"], c["agent"], c["level"], c["seed"], c["attempt"], c["instances"], c["finished"],
                  c["errors"], " ".join(c["missing"])) for c in short)
    return Section(id="missing", title="Runs read and what is missing", text=tuple(text),
                   columns=("model", "agent", "level", "seed", "attempt", "instances", "finished", "errors",
                            "missing"),
                   rows=rows)


def _table_i(table) -> Section:
    rows = level_table(table)
    out = tuple((r["model"], r["agent"], r["level"], r["finished"], r["units"], r["seeds"], r["attempts"],
                 _pct(r["pass_at_1"]), _pct(r["pass_at_1_std"]), _pct(r["pass_at_1_all"]), _pct(r["pass_at_k"]),
                 _pct(r["run_sd"]), r["paired"], r["delta_pp"], r["noise_floor_pp"], _yes_no(r["exceeds_noise_floor"]),
                 r["mean_steps"], r["mean_steps_change"], r["mean_input_tokens"], r["mean_input_tokens_change"],
                 r["mean_output_tokens"], r["mean_output_tokens_change"], r["mean_cost"], r["mean_cost_change"],
                 r["input_error"], r["infrastructure_error"], r["bug"]) for r in rows)
    columns = ("model", "agent", "level", "finished", "units", "seeds", "attempts (k)", "Pass@1 %", "sd (pp)",
               "Pass@1 % errors unresolved", "pass@k %", "run-to-run sd (pp)", "paired", "Δ Pass@1 (pp)",
               "noise floor (pp)", "Δ beyond noise", "actions", "Δ actions %", "input tokens",
               "Δ input %", "output tokens", "Δ output %", "cost USD", "Δ cost %", "input errors",
               "infrastructure errors", "bugs")
    formats = {"Pass@1 %": PCT, "sd (pp)": PCT, "Pass@1 % errors unresolved": PCT, "pass@k %": PCT,
               "run-to-run sd (pp)": PCT, "Δ Pass@1 (pp)": PP, "noise floor (pp)": PCT,
               "actions": NUM, "Δ actions %": PP, "input tokens": "{:.0f}", "Δ input %": PP, "output tokens": "{:.0f}",
               "Δ output %": PP, "cost USD": "{:.4f}", "Δ cost %": PP}
    return Section(
        id="table-i", title="Table I: Pass@1 and cost per model and level (SchrodingerRepo §V-A)",
        text=("Pass@1 is the mean over seeds of each seed's resolved share of its finished units (an unpaired mean of "
              "the cell); sd is the standard deviation over seeds (ddof 1, '-' with one seed). 'Pass@1 % errors "
              "unresolved' counts every unit, an error as unresolved, as SWE-bench's harness does: set it, not the "
              "first, beside a swebench.com number. Δ Pass@1 is the paired Δ against L0 in percentage points: the "
              "mean over the paired instances (finished both here and at L0) of the resolved share here minus at "
              "L0, the Δ of the significance table. The other Δ are relative changes of the per-unit mean against L0 "
              "in %. Units that ended in an error are counted in the last three columns and in no mean.",
              "Attempts (attempts=k): each view (instance, seed) run k times. pass@k is the unbiased estimator "
              "1 - C(n-c, k)/C(n, k) over each view's n finished attempts (c resolved), averaged over the views with "
              "n >= k. The run-to-run sd is the standard deviation (ddof 1) of Pass@1 over the attempts of one seed, "
              "pooled over seeds; '-' with one attempt. The noise floor of a level's Δ is 2 s0 sqrt(1/R0 + 1/R), s0 "
              "the run-to-run sd at L0 and R0, R the (seed, attempt) runs averaged at L0 and here: a |Δ| within it "
              "is what repeating L0 alone could give. 'Δ beyond noise' says whether |Δ| exceeds it ('-': undefined, "
              "one attempt).",),
        columns=columns, rows=out, formats=formats, figure=_pass_figure(rows))


def _integrity(table) -> Section:
    rows = integrity_counts(table)
    out = tuple((r["model"], r["agent"], r["level"], r["finished"], r["flagged"], r["unknown"],
                 _pct(r["resolved_rate"]), _pct(r["resolved_rate_unflagged"]), *(r[c] for c in INTEGRITY_CATEGORIES))
                for r in rows)
    columns = ("model", "agent", "level", "finished", "flagged", "unknown", "Pass@1 %", "Pass@1 % flagged left out",
               *INTEGRITY_CATEGORIES)
    return Section(
        id="integrity", title="Integrity: flagged units per model and level",
        text=("A unit is flagged when one of its commands, as it ran, matched an integrity rule "
              "(raydist/conf/integrity.yaml, raydist.agents.integrity): history beyond the view's HEAD "
              "(history_mining), writes to the graded tests or the test configuration grading puts back "
              "(test_tampering), a network attempt (network), the project read from outside the view "
              "(outside_view), or grading's scripts and paths probed (grader_probing).",
              "Pass@1 here is the resolved share of the finished units, pooled over seeds and attempts; beside it "
              "the same without the flagged units ('-' when every unit is flagged). The category columns count "
              "units with at least one flag of that category; a unit may count in several. Unknown: rows written "
              "before raydist recorded flags, kept in both rates. A unit's flags, each with its step, the command "
              "as typed and the rule, are its integrity_flags in runs.parquet."),
        columns=columns, rows=out, formats={"Pass@1 %": PCT, "Pass@1 % flagged left out": PCT})


def _questions(table) -> Section:
    rows = question_table(table)
    columns = ("model", "agent", "level", "answered", "units", "seeds", "Average Score", "sd", "Δ score",
               *DIMENSIONS, "actions", "Δ actions %", "input tokens", "Δ input %", "input errors",
               "infrastructure errors", "bugs")
    out = tuple((r["model"], r["agent"], r["level"], r["answered"], r["units"], r["seeds"], r["score"],
                 r["score_std"], r["delta"], *(r[d] for d in DIMENSIONS), r["mean_steps"], r["mean_steps_change"],
                 r["mean_input_tokens"], r["mean_input_tokens_change"], r["input_error"],
                 r["infrastructure_error"], r["bug"]) for r in rows)
    formats = {"Average Score": "{:.2f}", "sd": "{:.2f}", "Δ score": "{:+.2f}", **{d: "{:.2f}" for d in DIMENSIONS},
               "actions": NUM, "Δ actions %": PP, "input tokens": "{:.0f}", "Δ input %": PP}
    return Section(
        id="swe-qa", title="Repository questions: SWE-QA Average Score per model and level (SchrodingerRepo RQ3)",
        text=("Average Score (0-100): the judge's five SWE-QA scores (0-10 each: correctness, completeness, relevance, "
              "clarity, reasoning) summed and doubled, averaged over answered questions, then over seeds; sd over "
              "seeds. Δ score is against L0 in points; Δ actions and Δ input tokens are relative changes of the "
              "per-unit mean against L0 in %. An empty answer scores 0 (not judged). Units that ended in an error "
              "are counted in the last three columns and in no score or mean. The judge's prompt and raw replies of "
              "each answer are grading/<unit>.judge.json in its run directory.",),
        columns=columns, rows=out, formats=formats)


def _significance(table, seed: int) -> Section:
    rows = paired_significance(table, seed=seed)
    out = tuple((r["model"], r["agent"], r["level"], r["instances"], r["unpaired"], r["delta_pp"],
                 r["noise_floor_pp"], _yes_no(r["exceeds_noise_floor"]), r["ci_low"], r["ci_high"], r["b"], r["c"],
                 r["test"], r["p_value"], r["p_holm"], r["interval_agrees"]) for r in rows)
    tests = dict.fromkeys(r["test"] for r in rows)
    text = ["Each level against L0 on the instances with a finished unit at both (paired by instance). Δ is the "
            "mean over instances of the resolved share at the level minus at L0, in points (Table I's Δ); b and c "
            "are the instances resolved more often at L0 and at the level. p (Holm) adjusts the p-values over every "
            "comparison of this table (Holm's step-down: the family-wise error rate stays at 5%). The noise floor "
            "is Table I's: 2 s0 sqrt(1/R0 + 1/R) from the run-to-run sd at L0 over repeated attempts; 'Δ beyond "
            "noise' says whether |Δ| exceeds it ('-' with one attempt: run attempts=3 to know)."]
    text += [f"{test}: {next(r['assumptions'] for r in rows if r['test'] == test)}; 95% interval of Δ: "
             f"{next(r['interval'] for r in rows if r['test'] == test)}." for test in tests]
    disagree = [f"{r['model']} / {r['agent']} / {r['level']}" for r in rows if not r["interval_agrees"]]
    if disagree:
        text.append("The interval and the test disagree (one excludes 0, the other is not significant at 5%) for: "
                    + ", ".join(disagree) + "; read the test's p-value.")
    if not rows:
        text.append(f"No level has an instance finished both at {BASELINE} and there: nothing to test.")
    return Section(id="significance", title="Paired significance against L0 (§V-A)", text=tuple(text),
                   columns=("model", "agent", "level", "paired instances", "unpaired", "Δ (pp)", "noise floor (pp)",
                            "Δ beyond noise", "CI low (pp)", "CI high (pp)", "b", "c", "test", "p-value", "p (Holm)",
                            "interval agrees"),
                   rows=out, formats={"Δ (pp)": PP, "noise floor (pp)": PCT, "CI low (pp)": PP, "CI high (pp)": PP,
                                      "p-value": P3, "p (Holm)": P3})


def _figure_3(table) -> Section:
    rows = added_action_shares(table)
    out = tuple((r["model"], r["agent"], r["level"], r["instances"], *(r[f"added_{c}"] for c in ACTION_CATEGORIES),
                 r["added_total"], *(_pct(r[f"share_{c}"]) for c in FIGURE_CATEGORIES)) for r in rows)
    columns = ("model", "agent", "level", "paired instances", *(f"added {c}" for c in ACTION_CATEGORIES),
               "added (6 categories)", *(f"share {c} %" for c in FIGURE_CATEGORIES))
    formats = {c: "{:+.2f}" for c in columns if c.startswith("added")} | {
        c: PCT for c in columns if c.startswith("share")}
    return Section(
        id="figure-3", title="Figure 3: where the added actions go (§V-B)",
        text=("Per instance paired with L0: the mean actions per category at the level minus at L0 (exact). The share "
              "is each of the six categories' part of the gross added actions (the categories that rose), from 0 to "
              "100 %; a category that fell has share 0 and shows as its negative 'added'. '-' when the level added "
              "no actions overall: nothing to share out.",),
        columns=columns, rows=out, formats=formats, figure=_shares_figure(rows))


def _stability(table) -> Section:
    rows = verdict_stability(table)
    out = tuple((r["model"], r["agent"], r["level"], r["instances"], r["multi_seed"], r["seed_disagreements"],
                 r["paired"], r["resolved_to_unresolved"], r["unresolved_to_resolved"], r["mixed"], r["discordance"],
                 r["instances_needed"]) for r in rows)
    notes = [f"{r['model']} / {r['agent']} / {r['level']}: {r['power_note']}." for r in rows if r["power_note"]]
    return Section(
        id="stability", title="Verdict stability and power (§V-C)",
        text=("Seed disagreements: instances resolved at some seeds of a level and not at others. Flips against L0: "
              "every L0 unit resolved and none at the level, or the reverse; mixed instances count in no flip. "
              "Discordance: the chance that one L0 run and one run at the level disagree ('-', undefined, when "
              "nothing is paired). Instances needed: the least number of paired instances at which the exact "
              "McNemar test the report applies detects a 6-point drop with power 0.8 (searched from Connor's normal "
              "approximation).",
              *notes),
        columns=("model", "agent", "level", "instances", "with 2+ seeds", "seed disagreements", "paired",
                 "resolved→unresolved", "unresolved→resolved", "mixed", "discordance", "instances needed"),
        rows=out, formats={"discordance": "{:.3f}"})


def _contracts(table) -> list[Section]:
    """The validity risk of naming contracts (none when no instance of the runs has one)."""
    rows = contract_risk(table)
    if not rows:
        return []
    columns = ("model", "agent", "level", "instance_id", "names", "finished", "resolved", "unresolved",
               "unresolved_without_names")
    return [Section(
        id="naming-contracts", title="Validity risk: naming contracts",
        text=("Instances whose FAIL_TO_PASS tests call names that only the gold patch defines (absent at the "
              "base commit; a keyword is written f(name=)): a correct fix under another name fails them, and at "
              "L2 nothing shows the name. Unresolved without the names: unresolved units whose patch does not "
              "define them all, which may have fixed the bug under other names; they are a risk of the "
              "instance, not a model failure, though Table I counts them unresolved as SWE-bench does.",),
        columns=columns, rows=tuple(tuple(r[c] for c in columns) for r in rows))]


def _case_studies(table) -> list[Section]:
    """Figure 4: one case study per system that has an instance paired between L0 and a
    transformed level (the others are named in the text of the first)."""
    sections, skipped = [], []
    for model, agent in finished_units(table):
        try:
            case = case_study(table, model, agent)
        except ValueError as exc:
            skipped.append(str(exc))
            continue
        rows = tuple((u["level"], u["seed"], u["resolved"], u["steps"], *(u["actions"][c] for c in ACTION_CATEGORIES))
                     for u in case["units"])
        blocks = tuple((f"{u['level']} seed {u['seed']}: final patch (original coordinates)",
                        u["model_patch"] or "(empty patch)") for u in case["units"])
        sections.append(Section(
            id=f"case-study-{len(sections) + 1}",
            title=f"Case study (Figure 4): {case['instance_id']}, {model} / {agent}",
            text=(f"Chosen because: {case['reason']}.",),
            columns=("level", "seed", "resolved", "steps", *ACTION_CATEGORIES), rows=rows, blocks=blocks))
    if skipped and sections:
        sections[0] = replace(sections[0], text=sections[0].text + tuple(skipped))
    if not sections:
        sections.append(Section(id="case-study-1", title="Case study (Figure 4)",
                                text=tuple(skipped) or ("No finished unit.",)))
    return sections


def _yes_no(flag: bool | None) -> str | None:
    return None if flag is None else ("yes" if flag else "no")


def _pct(share: float | None) -> float | None:
    return None if share is None else 100 * share


def _pass_figure(rows: list[dict]):
    """Pass@1 (%) per level, one bar group per system, error bars the sd over seeds."""
    go = _plotly()
    figure = go.Figure()
    for system in dict.fromkeys((r["model"], r["agent"]) for r in rows):
        mine = [r for r in rows if (r["model"], r["agent"]) == system]
        figure.add_bar(name=" / ".join(system), x=[r["level"] for r in mine], y=[_pct(r["pass_at_1"]) for r in mine],
                       error_y={"type": "data", "array": [_pct(r["pass_at_1_std"]) or 0 for r in mine]})
    figure.update_layout(barmode="group", yaxis_title="Pass@1 (%)", xaxis_title="level", height=380,
                         margin={"t": 30, "b": 40}, legend_title_text="model / agent")
    return figure


def _shares_figure(rows: list[dict]):
    """Figure 3: the actions added per instance against L0, stacked by category (a category
    that fell goes below 0), one bar per system x level; the shares are in the table."""
    go = _plotly()
    figure = go.Figure()
    labels = [f"{r['model']} / {r['agent']} / {r['level']}" for r in rows]
    for category in FIGURE_CATEGORIES:
        figure.add_bar(name=category, x=labels, y=[r[f"added_{category}"] for r in rows])
    figure.update_layout(barmode="relative", yaxis_title="actions added per instance vs L0", height=380,
                         margin={"t": 30, "b": 40}, legend_title_text="category")
    return figure


def _plotly():
    return require("plotly.graph_objects", "analysis", "the report's figures")


def write_report(sections: Sequence[Section], out_dir: str | Path, *, title: str = "raydist report") -> dict:
    """Write ``sections`` into ``out_dir`` (created): ``report.html`` (one file, plotly.js and
    every figure embedded: it opens offline), ``report.md`` and ``<section id>.csv`` for every
    section with a table. Returns ``{"html": Path, "markdown": Path, "csv": [Path, ...]}``.
    Files are replaced atomically. Raises OSError when ``out_dir`` cannot be written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html, markdown = out / "report.html", out / "report.md"
    atomic_write_text(html, render_html(sections, title=title))
    atomic_write_text(markdown, render_markdown(sections, title=title))
    csvs = []
    for section in sections:
        if section.columns:
            csvs.append(out / f"{section.id}.csv")
            atomic_write_text(csvs[-1], render_csv(section))
    return {"html": html, "markdown": markdown, "csv": csvs}


def report_dir_main(paths: Sequence[str], out: str) -> int:
    """``raydist report PATHS --out DIR``: write the report, print the HTML file's path;
    1 with one line on stderr when nothing can be read, the extra is missing, or DIR cannot be
    written (named)."""
    import sys

    try:
        sections = repository_sections(paths)
    except (ValueError, MissingExtra, OSError) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 1
    try:
        written = write_report(sections, out, title=f"raydist report: {' '.join(map(str, paths))}")
    except OSError as exc:
        print(f"raydist: error: --out {out}: the report could not be written there ({exc.strerror or exc}); give "
              "another folder", file=sys.stderr)
        return 1
    print(written["html"])
    return 0


def write_sweep_report(run_dirs: Sequence[str | Path], *, diversity: bool = True) -> Path | None:
    """The report of the jobs a launch ran (``python -m raydist.launch``, and
    ``raydist.launch_problems`` with ``diversity=False``), written into ``<run dir>/report``
    for one job, or for a ``--multirun`` into ``report/`` of the folder the jobs' run
    directories share; returns that folder, None when no job left a table (``runs.parquet``, or
    a problems run's ``variants.parquet``). A report that cannot be written is one line on
    stderr naming the command that writes it later: the runs themselves are done and kept, so
    it never changes a launch's exit status."""
    import os
    import sys

    compiled = [Path(d) for d in dict.fromkeys(map(str, run_dirs))
                if (Path(d) / "runs.parquet").is_file() or (Path(d) / "variants.parquet").is_file()]
    if not compiled:
        return None
    out = Path(os.path.commonpath(compiled)) / "report"
    try:
        write_report(repository_sections(compiled, diversity=diversity), out, title=f"raydist report: {out.parent}")
    except Exception as exc:  # noqa: BLE001 - a report is an extra; it never fails a finished launch
        print(f"raydist: report not written to {out}: {type(exc).__name__}: {exc}; "
              f"write it later with: raydist report {' '.join(map(str, compiled))} --out {out}",
              file=sys.stderr, flush=True)
        return None
    print(f"report: {out / 'report.html'}", flush=True)
    return out
