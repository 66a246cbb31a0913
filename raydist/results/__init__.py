"""Result rows, tables and reports."""

from raydist.results.redact import redact
from raydist.results.schema import RUNS_SCHEMA
from raydist.results.store import ResultStore
from raydist.results.summary import summarise, to_markdown

__all__ = ["RUNS_SCHEMA", "ResultStore", "redact", "summarise", "to_markdown"]
