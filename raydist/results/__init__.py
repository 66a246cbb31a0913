"""Result rows, tables and reports."""

from raydist.results.redact import redact
from raydist.results.schema import RUNS_SCHEMA, STEPS_SCHEMA
from raydist.results.store import ResultStore
from raydist.results.summary import action_mix, action_mix_markdown, summarise, to_markdown

__all__ = ["RUNS_SCHEMA", "STEPS_SCHEMA", "ResultStore", "action_mix", "action_mix_markdown", "redact", "summarise",
           "to_markdown"]
