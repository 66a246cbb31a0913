"""The report of finished runs, both methods in one page: the repositories' tables and tests
(``raydist.analysis``, SchrodingerRepo §V) and DyCodeEval's (``raydist.problems.sections``), as
one offline HTML file, Markdown and CSV. Above both packages it combines; the launchers call
``write_sweep_report`` after their jobs and ``raydist report --out`` calls ``report_dir_main``.

    sections = repository_sections(["runs/builtin"])      # list[Section]
    write_report(sections, "runs/builtin/report")          # {"html": Path, "markdown": Path, "csv": [Path]}
"""

from raydist.reporting.sections import Section, report_dir_main, repository_sections, write_report, write_sweep_report

__all__ = ["Section", "report_dir_main", "repository_sections", "write_report", "write_sweep_report"]
