"""The contamination card: one ``card.json`` (schema ``CARD_SCHEMA``, versioned) and one
``card.md`` per model, the evidence raydist computes about a model's results in one place
(``raydist export card RUN_DIR...``).

Every signal is ``{"value": ..., "reason": null}`` when it was measured, and ``{"value": null,
"reason": "..."}`` when it was not: an unmeasured signal is never 0. The signals:

- ``levels``: per agent and level other than L0, the paired Δ Pass@1 against L0 with its 95%
  interval, p and Holm p, and the L0 noise floor (``raydist.analysis.significance``,
  ``raydist.analysis.attempts``); Pass@1 over finished units and with errors counted
  unresolved (``raydist.analysis.repositories.level_table``).
- ``recall``: the recall probe's shares of each leakage level (``summary.json`` of a recall run
  directory among the paths).
- ``dynamic_problems``: pass@1 on seed problems against DyPass@1 on their variants, and Figure 5's
  verdict (inside, below or above the prediction band; undefined with fewer than 3 models) from
  the problems run directories among the paths (DyCodeEval §4.3, §5).
- ``fresh_vs_static``: Pass@1 at L0 on ``benchmark=fresh`` instances beside the other benchmarks'.
- ``memorised_names``: units whose agent typed hidden original names before being shown them.
- ``integrity``: finished units flagged by an integrity rule, per category.
- ``naming_contracts``: the card's instances with a naming contract and its names, from the rows
  (or the records given); ``grader_false_rejections``: the instance set's counts, from the JSON
  files ``raydist audit-tests --out`` wrote, when given.
- ``provenance``: raydist's and the libraries' versions, the run directories, the config
  hashes and the instance ids per benchmark the card rests on.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from raydist._util.run_dirs import GATE_DIR
from raydist.analysis.contamination import contamination_fit
from raydist.analysis.questions import split_questions
from raydist.analysis.repositories import level_table
from raydist.analysis.runs import BASELINE, load_runs
from raydist.analysis.significance import paired_significance
from raydist.outcomes import FINISHED, RESOLVED
from raydist.problems.tables import load_problem_run, pass_table, score_points
from raydist.results.report import find_run_dirs

CARD_VERSION = "raydist.card/1"
SIGNALS = ("levels", "recall", "dynamic_problems", "fresh_vs_static", "memorised_names", "integrity",
           "naming_contracts", "grader_false_rejections")
_LIBRARIES = ("ray", "litellm", "swebench", "mini-swe-agent", "hydra-core", "pyarrow", "docker")

_SIGNAL = {"type": "object", "required": ["value", "reason"], "additionalProperties": False,
           "properties": {"value": {}, "reason": {"type": ["string", "null"]}},
           "oneOf": [{"properties": {"value": {"not": {"type": "null"}}, "reason": {"type": "null"}}},
                     {"properties": {"value": {"type": "null"}, "reason": {"type": "string", "minLength": 1}}}]}
CARD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": CARD_VERSION,
    "title": "raydist contamination card",
    "type": "object",
    "required": ["schema", "model", "generated_at", "signals", "provenance"],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": CARD_VERSION},
        "model": {"type": "string", "minLength": 1},
        "generated_at": {"type": "string"},
        "signals": {"type": "object", "required": list(SIGNALS), "additionalProperties": False,
                    "properties": {name: _SIGNAL for name in SIGNALS}},
        "provenance": {"type": "object", "required": ["raydist", "python", "libraries", "run_dirs", "config_hashes",
                                                      "instances"],
                       "properties": {"raydist": {"type": "string"}, "python": {"type": "string"},
                                      "libraries": {"type": "object"},
                                      "run_dirs": {"type": "array", "items": {"type": "string"}},
                                      "config_hashes": {"type": "array", "items": {"type": "string"}},
                                      "instances": {"type": "object"}}},
    },
}
"""The JSON Schema (draft 2020-12) every ``card.json`` validates against; written beside the cards
as ``card.schema.json``."""


def measured(value: Any) -> dict:
    """A measured signal."""
    return {"value": value, "reason": None}


def unmeasured(reason: str) -> dict:
    """A signal that was not measured, and why (never 0)."""
    return {"value": None, "reason": reason}


def build_cards(paths: Sequence[str | Path], *, audits: Sequence[str | Path] = (),
                contracts: Sequence[str | Path] = ()) -> dict[str, dict]:
    """``{model: card}`` for every model with a main-job row at or below ``paths`` (a scripted
    agent's rows, model ``-``, are carded under the agent's name). ``audits``: JSON files of
    ``raydist audit-tests --out``; ``contracts``: naming-contract records (JSON with a
    ``summary``). Raises ``ValueError`` (``load_runs``') when no ``runs.parquet`` is found."""
    folders = [Path(p) for p in paths]
    run_dirs, _ = find_run_dirs(folders)
    # The validity gate's oracle and null runs (<benchmark>/_gate) are read only when named, as in the report.
    compiled = [d / "runs.parquet" for d in run_dirs if (d.name != GATE_DIR or d in folders)
                and (d / "runs.parquet").is_file()]
    table, _ = split_questions(load_runs(compiled or folders))
    rows = table.to_pylist()
    extra = _extra_columns(sorted({r["run_dir"] for r in rows}))
    for row in rows:
        row.update(extra.get((row["run_dir"], row["key"]), {}))
        row["card"] = row["agent"] if row["model"] == "-" else row["model"]
    benchmarks = {d: _benchmark_of(Path(d)) for d in {r["run_dir"] for r in rows}}
    recall = _recall_runs(paths)
    problems = _problems(paths)
    audit, contract = _files(audits, "grader_false_rejections"), _files(contracts, "naming_contracts")
    levels = level_table(table)
    tests = paired_significance(table)
    cards = {}
    for name in sorted({r["card"] for r in rows}):
        mine = [r for r in rows if r["card"] == name]
        agents = {(r["model"], r["agent"]) for r in mine}
        cards[name] = {
            "schema": CARD_VERSION, "model": name, "generated_at": datetime.now(UTC).isoformat(),
            "signals": {
                "levels": _levels(levels, tests, agents),
                "recall": recall.get(name) or unmeasured(
                    f"no recall probe of {name} among the paths: run `raydist probe model={name}` and give its "
                    "run directory"),
                "dynamic_problems": problems.get(name) or unmeasured(
                    f"no problems run with completions of {name} among the paths: run `raydist problems` with "
                    f"{name} among the models under test and give its run directory"),
                "fresh_vs_static": _fresh(mine, benchmarks),
                "memorised_names": _memorised(mine),
                "integrity": _integrity(mine),
                "naming_contracts": contract if contracts else _contracts(mine),
                "grader_false_rejections": audit,
            },
            "provenance": {
                "raydist": _version("raydist"), "python": platform.python_version(),
                "libraries": {lib: _version(lib) for lib in _LIBRARIES},
                "run_dirs": sorted({r["run_dir"] for r in mine}),
                "config_hashes": sorted({r["config_hash"] for r in mine if r.get("config_hash")}),
                "instances": {b: sorted({r["instance_id"] for r in mine if benchmarks[r["run_dir"]] == b})
                              for b in sorted({benchmarks[r["run_dir"]] for r in mine})},
            },
        }
    return cards


def _extra_columns(run_dirs: Iterable[str]) -> dict[tuple[str, str], dict]:
    """Columns the analysis does not read: config hash, memorised names, integrity (null in files
    written before raydist had them)."""
    wanted = ("key", "config_hash", "memorised_count", "memorised_names", "integrity_flags", "integrity_flagged",
              "naming_contract")
    out = {}
    for run_dir in run_dirs:
        file = Path(run_dir) / "runs.parquet"
        present = [c for c in wanted if c in pq.read_schema(file).names]
        for row in pq.read_table(file, columns=present).to_pylist():
            out[(run_dir, row["key"])] = {c: row.get(c) for c in wanted if c != "key"}
    return out


def _benchmark_of(run_dir: Path) -> str:
    """The benchmark a run directory was launched on: its ``.hydra/config.yaml``'s ``benchmark.name``,
    else the folder three levels up (``<output_root>/<benchmark>/<agent>/<model>/<view>``)."""
    from omegaconf import OmegaConf

    config = run_dir / ".hydra" / "config.yaml"
    if config.is_file():
        name = OmegaConf.select(OmegaConf.load(config), "benchmark.name")
        if name:
            return str(name)
    return run_dir.parents[2].name if len(run_dir.parents) > 2 else "unknown"


def _levels(levels: list[dict], tests: list[dict], agents: set) -> dict:
    by_level = {(t["model"], t["agent"], t["level"]): t for t in tests}
    out = []
    for row in levels:
        if (row["model"], row["agent"]) not in agents:
            continue
        test = by_level.get((row["model"], row["agent"], row["level"]), {})
        out.append({"agent": row["agent"], "level": row["level"], "finished": row["finished"],
                    "pass_at_1": row["pass_at_1"], "pass_at_1_errors_unresolved": row["pass_at_1_all"],
                    "attempts": row["attempts"], "pass_at_k": row["pass_at_k"], "run_sd": row["run_sd"],
                    "paired": row["paired"], "delta_pp": None if row["level"] == BASELINE else row["delta_pp"],
                    "ci_low_pp": test.get("ci_low"), "ci_high_pp": test.get("ci_high"),
                    "p_value": test.get("p_value"), "p_holm": test.get("p_holm"), "test": test.get("test"),
                    "noise_floor_pp": row["noise_floor_pp"], "exceeds_noise_floor": row["exceeds_noise_floor"]})
    if not out:
        return unmeasured("no finished unit of this model")
    if not any(r["level"] != BASELINE and r["paired"] for r in out):
        return unmeasured("no level other than L0 has an instance finished both there and at L0: no Δ to give")
    return measured(out)


def _recall_runs(paths: Sequence[str | Path]) -> dict[str, dict]:
    out = {}
    for path in map(Path, paths):
        for summary in sorted(path.rglob("summary.json")) if path.is_dir() else []:
            if not (summary.parent / "recall.parquet").is_file():
                continue
            for model in json.loads(summary.read_text()).get("models", []):
                out[str(model["model"])] = measured({"instances": model["instances"], "answered": model["answered"],
                                                     "shares": model["shares"], "run_dir": str(summary.parent)})
    return out


def _problems(paths: Sequence[str | Path]) -> dict[str, dict]:
    _, problem_dirs = find_run_dirs(paths)
    table = [row | {"run_dir": str(d)} for d in problem_dirs for row in pass_table(load_problem_run(d).completions)]
    points = score_points(table)
    verdicts: dict[str, str] = {}
    reason = None
    try:
        fit = contamination_fit(points)
        verdicts = {p.name: p.side or "inside" for p in fit.points}
    except ValueError as exc:
        reason = f"Figure 5's verdict is undefined: {exc}"
    out = {}
    for row in table:
        out[row["model"]] = measured({
            "pass@1": row.get("pass@1"), "DyPass@1": row.get("DyPass@1"), "delta@1": row.get("delta@1"),
            "figure5": verdicts.get(row["model"]), "figure5_reason": reason if row["model"] not in verdicts else None,
            "run_dir": row["run_dir"]})
    return out


def _fresh(rows: list[dict], benchmarks: dict[str, str]) -> dict:
    base = [r for r in rows if r["level"] == BASELINE and r["outcome"] in FINISHED]
    fresh = [r for r in base if benchmarks[r["run_dir"]] == "fresh"]
    static = [r for r in base if benchmarks[r["run_dir"]] != "fresh"]
    if not fresh or not static:
        missing = "benchmark=fresh" if not fresh else "a static benchmark (builtin, swebench, ...)"
        return unmeasured(f"no finished L0 unit on {missing} among the paths: run `raydist tasks build`, then "
                          "`raydist run benchmark=fresh levels=[L0]` beside a static benchmark, and give both")
    rate = lambda units: sum(u["outcome"] == RESOLVED for u in units) / len(units)  # noqa: E731
    return measured({"fresh_pass_at_1": rate(fresh), "fresh_units": len(fresh), "static_pass_at_1": rate(static),
                     "static_units": len(static),
                     "static_benchmarks": sorted({benchmarks[r["run_dir"]] for r in static})})


def _memorised(rows: list[dict]) -> dict:
    finished = [r for r in rows if r["outcome"] in FINISHED]
    known = [r for r in finished if r.get("memorised_count") is not None]
    if not known:
        return unmeasured("no finished unit records memorised names (rows written before raydist counted them)")
    names = sorted({n for r in known for n in json.loads(r.get("memorised_names") or "[]")})
    return measured({"units": len(known), "units_with_memorised": sum(bool(r["memorised_count"]) for r in known),
                     "names": names})


def _integrity(rows: list[dict]) -> dict:
    known = [r for r in rows if r["outcome"] in FINISHED and r.get("integrity_flagged") is not None]
    if not known:
        return unmeasured("no finished unit records integrity flags (rows written before raydist judged them)")
    categories: dict[str, int] = {}
    for row in known:
        for category in sorted({f["category"] for f in json.loads(row.get("integrity_flags") or "[]")}):
            categories[category] = categories.get(category, 0) + 1
    return measured({"units": len(known), "flagged": sum(bool(r["integrity_flagged"]) for r in known),
                     "by_category": categories})


def _contracts(rows: list[dict]) -> dict:
    """The naming contracts of the card's instances, from their rows (``naming_contract``: the
    names the FAIL_TO_PASS tests call that only the gold patch defines; ``raydist.views.contracts``)."""
    known = {r["instance_id"]: json.loads(r["naming_contract"]) for r in rows if r.get("naming_contract") is not None}
    if not known:
        return unmeasured("no row records its instance's naming contract (rows written before raydist found them): "
                          "run the launch again, or give --naming-contracts FILE")
    return measured({"instances": len(known), "with_contract": sum(bool(v) for v in known.values()),
                     "names": {i: names for i, names in sorted(known.items()) if names}})


def _files(files: Sequence[str | Path], signal: str) -> dict:
    if not files:
        how = ("`raydist audit-tests --out FILE` and `raydist export card ... --audit-tests FILE`"
               if signal == "grader_false_rejections" else "the naming-contract record of the instance set")
        return unmeasured(f"no record of this instance set was given: {how}")
    return measured([json.loads(Path(f).read_text())["summary"] for f in files])


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def card_markdown(card: dict) -> str:
    """``card.md``: the card's signals as a page, each unmeasured one with its reason."""
    lines = [f"# Contamination card: {card['model']}", "",
             f"{card['schema']}, generated {card['generated_at']}, raydist {card['provenance']['raydist']}.", ""]
    for name in SIGNALS:
        signal = card["signals"][name]
        lines.append(f"## {name.replace('_', ' ')}")
        lines.append("")
        if signal["value"] is None:
            lines += [f"Not measured: {signal['reason']}", ""]
        elif name == "levels":
            lines += ["| agent | level | Pass@1 % | Pass@1 % errors unresolved | Δ (pp) | 95% CI (pp) | p (Holm) "
                      "| noise floor (pp) | Δ beyond noise |", "|---|---|---:|---:|---:|---|---:|---:|---|"]
            lines += [f"| {r['agent']} | {r['level']} | {_pct(r['pass_at_1'])} "
                      f"| {_pct(r['pass_at_1_errors_unresolved'])} | {_num(r['delta_pp'])} | {_ci(r)} "
                      f"| {_num(r['p_holm'], '{:.3g}')} | {_num(r['noise_floor_pp'], '{:.1f}')} "
                      f"| {_flag(r['exceeds_noise_floor'])} |" for r in signal["value"]]
            lines.append("")
        else:
            lines += ["```json", json.dumps(signal["value"], indent=1, sort_keys=True), "```", ""]
    prov = card["provenance"]
    lines += ["## provenance", "", f"- run directories: {', '.join(prov['run_dirs'])}",
              f"- config hashes: {', '.join(prov['config_hashes'])}",
              *(f"- {b}: {len(ids)} instances: {', '.join(ids)}" for b, ids in prov["instances"].items()),
              f"- python {prov['python']}; " + ", ".join(f"{k} {v}" for k, v in prov["libraries"].items()), ""]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None, fmt: str = "{:+.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _ci(row: dict) -> str:
    return "-" if row["ci_low_pp"] is None else f"[{row['ci_low_pp']:+.1f}, {row['ci_high_pp']:+.1f}]"


def _flag(x: bool | None) -> str:
    return "-" if x is None else ("yes" if x else "no")


def write_cards(cards: dict[str, dict], out: Path) -> list[Path]:
    """Write ``out/<model>/card.json`` and ``card.md`` for each card, and ``out/card.schema.json``;
    returns the card.json paths. A model name is made safe for a folder (``/`` becomes ``-``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "card.schema.json").write_text(json.dumps(CARD_SCHEMA, indent=1) + "\n", encoding="utf-8")
    written = []
    for name, card in cards.items():
        folder = out / "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("-.")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / "card.md").write_text(card_markdown(card), encoding="utf-8")
        written.append(folder / "card.json")
    return written
