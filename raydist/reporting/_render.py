"""Writing ``raydist.reporting.Section`` values as HTML (one self-contained file: the
plotly.js bundle and every figure are inlined, so the page opens offline), Markdown and CSV."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence

MISSING = "-"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { background: #f2f2f2; } td.text { text-align: left; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
nav a { margin-right: 1em; }
"""


def cell(value, spec: str | None) -> str:
    """One table cell as text: None is ``MISSING``, a bool yes/no, a number by ``spec`` (a
    float without one to 4 significant digits)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if spec and isinstance(value, int | float):
        return spec.format(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render_html(sections: Sequence, *, title: str) -> str:
    """The whole page: a title, a contents line, then each section as ``<section id=...>``
    with its paragraphs, table (``<table id="<id>-table">``), figure (``<div id="<id>-plot">``)
    and preformatted blocks."""
    from plotly.offline import get_plotlyjs

    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style><script>{get_plotlyjs()}</script></head><body>",
             f"<h1>{html.escape(title)}</h1><nav>",
             *(f"<a href='#{s.id}'>{html.escape(s.title.split(':')[0])}</a>" for s in sections), "</nav>"]
    for s in sections:
        parts.append(f"<section id='{s.id}'><h2>{html.escape(s.title)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in s.text]
        if s.columns:
            parts.append(_html_table(s))
        if s.figure is not None:
            parts.append(s.figure.to_html(full_html=False, include_plotlyjs=False, div_id=f"{s.id}-plot",
                                          config={"displaylogo": False}))
        for caption, text in s.blocks:
            parts.append(f"<details><summary>{html.escape(caption)}</summary><pre>{html.escape(text)}</pre></details>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _html_table(s) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in s.columns)
    body = []
    for row in s.rows:
        cells = []
        for column, value in zip(s.columns, row):
            kind = "text" if isinstance(value, str) else "num"
            cells.append(f"<td class='{kind}'>{html.escape(cell(value, s.formats.get(column)))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    if not s.rows:
        body.append(f"<tr><td class='text' colspan='{len(s.columns)}'>(no rows)</td></tr>")
    return f"<table id='{s.id}-table'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_markdown(sections: Sequence, *, title: str) -> str:
    """The same report as Markdown: figures are left out (their numbers are in the tables)."""
    lines = [f"# {title}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        for paragraph in s.text:
            lines += [paragraph, ""]
        if s.columns:
            lines.append("| " + " | ".join(s.columns) + " |")
            lines.append("|" + "|".join("---" if i < 3 else "---:" for i in range(len(s.columns))) + "|")
            for row in s.rows:
                lines.append("| " + " | ".join(cell(v, s.formats.get(c)).replace("|", "\\|")
                                               for c, v in zip(s.columns, row)) + " |")
            lines.append("")
        for caption, text in s.blocks:
            lines += [f"{caption}:", "", "```", text.rstrip("\n"), "```", ""]
    return "\n".join(lines)


def render_csv(section) -> str:
    """The section's table with raw values (full precision; an undefined cell is empty)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(section.columns)
    for row in section.rows:
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()
