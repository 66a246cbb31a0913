"""`raydist report --out DIR`: the analysis report of a sweep (SchrodingerRepo §V) as one
self-contained HTML file, Markdown and CSV, built from hand-made runs.parquet files whose
every number is computed by hand here, and rendered in a real headless Chromium."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess

import pytest

from raydist.cli import main as raydist_main
from raydist.reporting import repository_sections, write_report
from tests.test_analysis_repositories import U, unit, write_run

# Four instances. L0: i1, i2, i3 resolved, i4 not; L2: only i3 resolved. Each L2 unit takes
# one more navigate, search and edit action than at L0.
L0_ACTIONS, L2_ACTIONS = (1, 0, 0, 0, 0, 0), (2, 1, 0, 0, 1, 0)


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweep"
    write_run(root / "levels=L0", [unit(i, "L0", outcome="resolved" if i != "i4" else U, actions=L0_ACTIONS)
                                   for i in ("i1", "i2", "i3", "i4")])
    write_run(root / "levels=L2", [unit(i, "L2", outcome="resolved" if i == "i3" else U, actions=L2_ACTIONS)
                                   for i in ("i1", "i2", "i3", "i4")])
    (root / "levels=L3" / "rows").mkdir(parents=True)  # a launch stopped before it compiled its rows
    return root


def read_csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_report_holds_table_i_the_paired_test_figure_3_stability_and_the_case_by_hand(sweep, tmp_path):
    written = write_report(repository_sections([sweep]), tmp_path / "report")
    out = tmp_path / "report"
    assert sorted(p.name for p in out.iterdir()) == [
        "case-study-1.csv", "figure-3.csv", "integrity.csv", "missing.csv", "report.html", "report.md",
        "significance.csv", "stability.csv", "table-i.csv"]
    assert written["html"] == out / "report.html"
    table_i = read_csv(out / "table-i.csv")
    # Pass@1: 3/4 at L0, 1/4 at L2 -> a drop of 50 points; one seed, so no sd.
    assert [(r["level"], float(r["Pass@1 %"]), r["sd (pp)"], float(r["Δ Pass@1 (pp)"])) for r in table_i] == [
        ("L0", 75.0, "", 0.0), ("L2", 25.0, "", -50.0)]
    # actions per unit: 1 at L0 + submit = 10 steps in the rows; tokens equal -> 0 % change
    assert [(r["actions"], r["Δ input %"]) for r in table_i] == [("10.0", "0.0"), ("10.0", "0.0")]
    [test] = read_csv(out / "significance.csv")
    # i1, i2 resolved at L0 only (b = 2), none at L2 only (c = 0): exact McNemar p = 2 * 0.5**2 = 0.5.
    # The exact conditional interval: Clopper-Pearson for 0 of 2 is [0, 1 - 0.025^(1/2)] = [0, 0.841886],
    # through (b + c) / n * (2t - 1) = 1/2 * (2t - 1): [-50, +34.19] points, holding 0 as the test says.
    assert (test["b"], test["c"], test["test"], float(test["p-value"])) == ("2", "0", "exact McNemar", 0.5)
    assert (float(test["Δ (pp)"]), float(test["CI low (pp)"]), float(test["CI high (pp)"])) == pytest.approx(
        (-50.0, -50.0, 50 * (2 * (1 - 0.025 ** 0.5) - 1)), rel=1e-9)  # 34.19
    assert (float(test["p (Holm)"]), test["interval agrees"]) == (0.5, "True")
    [figure] = read_csv(out / "figure-3.csv")
    assert [figure[f"added {c}"] for c in ("navigate", "search", "read", "probe", "edit", "test")] == [
        "1.0", "1.0", "0.0", "0.0", "1.0", "0.0"]
    assert {round(float(figure[f"share {c} %"]), 9) for c in ("navigate", "search", "edit")} == {round(100 / 3, 9)}
    stability = read_csv(out / "stability.csv")
    # pairs (1,0), (1,0), (1,1), (0,0): discordance 0.5; alpha 0.05, power 0.8, drop 6 points: Connor's
    # (1.959964 * sqrt(0.5) + 0.841621 * sqrt(0.5 - 0.0036))**2 / 0.0036 = 1087.8 -> 1088 is where the
    # search starts; the exact McNemar test first reaches power 0.8 at 1119 (tests/test_analysis_repositories.py
    # checks that power against an enumeration of every outcome).
    assert [(r["level"], r["resolved→unresolved"], r["discordance"], r["instances needed"]) for r in stability] == [
        ("L0", "", "", ""), ("L2", "2", "0.5", "1119")]
    case = read_csv(out / "case-study-1.csv")
    assert [(r["level"], r["resolved"], r["navigate"]) for r in case] == [("L0", "True", "1"), ("L2", "False", "2")]
    md = (out / "report.md").read_text()
    assert "Case study (Figure 4): i1, m / a" in md and "Chosen because: resolved at L0, not at L2." in md
    assert (f"Not read, no runs.parquet (a stopped launch; run it again to compile its rows): "
            f"{sweep / 'levels=L3'}") in md
    # One attempt: no run-to-run sd, so the noise floor and whether Δ exceeds it are undefined ('-').
    assert ("| m | a | L2 | 4 | 0 | -50.0 | - | - | -50.0 | +34.2 | 2 | 0 | exact McNemar | 0.5 | 0.5 | yes |"
            in md.replace("+-", "-"))
    html = (out / "report.html").read_text()
    # The rows carry no integrity columns' values: every finished unit is unknown, none flagged.
    assert [(r["level"], r["flagged"], r["unknown"]) for r in read_csv(out / "integrity.csv")] == [
        ("L0", "0", "4"), ("L2", "0", "4")]
    for element in ("missing", "table-i", "integrity", "significance", "figure-3", "stability", "case-study-1",
                    "table-i-table", "table-i-plot", "figure-3-plot"):
        assert f"id='{element}'" in html or f'id="{element}"' in html, element
    assert "exact McNemar: one verdict per instance and level" in html
    assert re.search(r"<script[^>]*\bsrc=", html) is None  # plotly.js is inlined: the page opens offline


def test_the_cli_writes_the_report_and_a_path_with_no_runs_is_one_line(sweep, tmp_path, capsys):
    assert raydist_main(["report", str(sweep), "--out", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'r' / 'report.html'}\n"
    (tmp_path / "empty").mkdir()
    assert raydist_main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "r2")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"raydist: error: no runs.parquet at or below {tmp_path / 'empty'}")
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "r2").exists()


def test_the_gate_runs_beside_the_jobs_are_left_out_unless_named(tmp_path):
    root = tmp_path / "builtin"
    write_run(root / "oracle" / "m" / "L0__s0", [unit("i1", "L0")])
    write_run(root / "_gate", [unit("i1", "L0", agent="null", outcome=U)])
    [sources] = [s for s in repository_sections([root]) if s.id == "missing"]
    assert sources.text[0] == f"1 units from 1 run directories: {(root / 'oracle' / 'm' / 'L0__s0').resolve()}."
    [sources] = [s for s in repository_sections([root / "_gate"]) if s.id == "missing"]
    assert sources.text[0] == f"1 units from 1 run directories: {(root / '_gate').resolve()}."


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (launch/setup.sh "
                                                              "installs it with the dev extra)")
def test_headless_chromium_draws_every_table_and_both_figures(sweep, tmp_path):
    from PIL import Image

    html = write_report(repository_sections([sweep]), tmp_path / "report")["html"]
    browser = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--virtual-time-budget=10000", "--window-size=1400,2600"]
    dom = subprocess.run([*browser, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    # After the scripts ran, each figure's div holds plotly's SVG with one bar trace per system or category.
    for plot, traces in (("table-i-plot", 1), ("figure-3-plot", 6)):
        start = dom.index(f'id="{plot}"')
        body = dom[start:dom.index("</section>", start)]
        assert "main-svg" in body, plot
        assert len(re.findall(r'class="trace bars"', body)) == traces, plot
    for table in ("missing-table", "table-i-table", "significance-table", "figure-3-table", "stability-table",
                  "case-study-1-table"):
        assert f'id="{table}"' in dom, table
    shot = tmp_path / "shot.png"
    subprocess.run([*browser, f"--screenshot={shot}", html.as_uri()], capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 2600)
    # Not blank: text and bars in several colours; plotly's grey plot area and its default bar colours are drawn.
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 100
    drawn = {c for _, c in colours}
    assert (229, 236, 246) in drawn  # plotly's plot background (#E5ECF6)
    assert (99, 110, 250) in drawn  # plotly's first bar colour (#636EFA)


def test_a_problems_run_directory_adds_dycodeeval_tables_and_figures(sweep, tmp_path):
    """DyCodeEval's sections (raydist.problems.sections) follow the repositories' ones in the
    same page: Table 2's pass@k and DyPass@k, the Figure 5 fit with its band, diversity,
    collisions and stability, each with its figure."""
    from tests.test_problems_sections import make_run

    problems = make_run(tmp_path / "problems" / "humaneval" / "gen")
    written = write_report(repository_sections([sweep, problems]), tmp_path / "report")
    ids = [p.stem for p in written["csv"]]
    assert ids[:7] == ["missing", "table-i", "integrity", "significance", "figure-3", "stability", "case-study-1"]
    assert [i.split("-")[1] for i in ids[7:]] == ["pass", "contamination", "diversity", "collision", "stability"]
    html = written["html"].read_text()
    for section in ids[7:]:
        assert f"id='{section}-plot'" in html or f'id="{section}-plot"' in html, section
    with open(tmp_path / "report" / f"{ids[7]}.csv", newline="") as f:
        # m1 passes both samples of every seed and variant (tests/test_problems_sections.py's PASSING)
        m1 = next(r for r in csv.DictReader(f) if r["model"] == "m1")
    assert (float(m1["pass@1"]), float(m1["DyPass@1"]), float(m1["delta@1"])) == (1.0, 1.0, 0.0)
