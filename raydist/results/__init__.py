"""Result rows, tables and reports."""

from raydist.results.redact import redact
from raydist.results.schema import RUNS_SCHEMA, STEPS_SCHEMA
from raydist.results.store import ResultStore, RunDirBusy, atomic_write_text, run_dir_lock
from raydist.results.summary import (
    action_mix,
    action_mix_markdown,
    error_counts,
    integrity_counts,
    integrity_markdown,
    summarise,
    to_markdown,
)

__all__ = ["RUNS_SCHEMA", "STEPS_SCHEMA", "ResultStore", "RunDirBusy", "action_mix", "action_mix_markdown",
           "atomic_write_text", "error_counts", "integrity_counts", "integrity_markdown", "redact", "run_dir_lock",
           "summarise", "to_markdown"]
