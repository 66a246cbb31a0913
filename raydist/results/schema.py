"""The Arrow schemas of ``runs.parquet`` (one row per run unit) and ``steps.parquet`` (one
row per command an agent ran).

Units: seconds for times, tokens for token counts, US dollars for cost (0 for local models).
``outcome`` is the one taxonomy of ``raydist.outcomes`` (resolved, unresolved, answered, input_error,
infrastructure_error, bug); ``error`` holds the message of an error outcome (a bug's with its
traceback) and, for a finished unit, what stopped it short (a model error, a patch that does
not apply, a test timeout).

Every Parquet table raydist builds from row dicts (these two, ``variants.parquet`` and
``completions.parquet``) goes through :func:`table_from_rows`, which refuses a key that has no
column rather than dropping it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa

RUNS_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("agent", pa.string(), nullable=False),
        pa.field("level", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        # Which of the launch's ``attempts`` repetitions of the view (0-based; null in files
        # written before attempts existed, read as 0). Not ``attempts`` below: the tries.
        pa.field("attempt", pa.int64()),
        pa.field("config_hash", pa.string(), nullable=False),
        pa.field("resolved", pa.bool_(), nullable=False),
        # The one outcome taxonomy (raydist.outcomes): resolved | unresolved | answered | input_error |
        # infrastructure_error | bug; agent_exit says how a finished agent run ended
        # (submitted, step_limit, cost_limit, time_limit, format_errors, model_error);
        # error_cause groups errors (docker, model_unreachable, disk_full, ...); attempts
        # counts the tries the unit took in its last launch (infrastructure retries; the
        # repetition a unit is, is ``attempt``).
        pa.field("outcome", pa.string()),
        pa.field("agent_exit", pa.string()),
        pa.field("error_cause", pa.string()),
        pa.field("attempts", pa.int64()),
        # The Ray node that ran the unit's last attempt: its id (``ray list nodes``) and IP
        # address; null when no task reported back (a lost node, an image that failed to
        # build). Where a unit ran is no part of its key.
        pa.field("node", pa.string()),
        pa.field("node_ip", pa.string()),
        pa.field("exit_status", pa.string()),
        pa.field("steps", pa.int64()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("cost", pa.float64()),
        pa.field("agent_seconds", pa.float64()),
        pa.field("grading_seconds", pa.float64()),
        pa.field("wall_seconds", pa.float64()),
        pa.field("patch_applied", pa.bool_()),
        pa.field("apply_method", pa.string()),
        pa.field("fail_to_pass_passed", pa.int64()),
        pa.field("fail_to_pass_total", pa.int64()),
        pa.field("pass_to_pass_passed", pa.int64()),
        pa.field("pass_to_pass_total", pa.int64()),
        # FAIL_TO_PASS / PASS_TO_PASS ids the graded run did not report at all (each counts
        # as not passed, as in SWE-bench).
        pa.field("tests_missing", pa.int64()),
        pa.field("model_patch", pa.string()),
        pa.field("view_files", pa.int64()),
        pa.field("view_meta", pa.string()),
        # L1 (§III-B): "paraphrase" when a verified paraphrase was shown, "rule" when the seeded
        # rule restatement was (no paraphrase passed, or no view model), "canonical" when the
        # statement itself was (the level has no L1), with the model attempts spent.
        pa.field("statement_source", pa.string()),
        pa.field("statement_attempts", pa.int64()),
        # Action taxonomy (§IV RQ2): steps per category, from raydist.agents.taxonomy.
        pa.field("actions_navigate", pa.int64()),
        pa.field("actions_search", pa.int64()),
        pa.field("actions_read", pa.int64()),
        pa.field("actions_probe", pa.int64()),
        pa.field("actions_edit", pa.int64()),
        pa.field("actions_test", pa.int64()),
        pa.field("actions_submit", pa.int64()),
        pa.field("actions_other", pa.int64()),
        # Leak audit (§III-F): original repository-internal names shown to the agent, summed
        # over every observation of the run (0 is the requirement).
        pa.field("leak_count", pa.int64()),
        # Exposure audit (raydist.views.audit): the distinct identity tokens of the original
        # repository found in what the agent was shown (JSON list), and how many names the
        # view left unmapped (listed with their reasons in view_meta).
        pa.field("leaked_names", pa.string()),
        pa.field("unmapped_names", pa.int64()),
        # Memorisation signal: original (hidden) names the agent typed in its commands
        # without having been shown them, counted and listed (JSON list).
        pa.field("memorised_count", pa.int64()),
        pa.field("memorised_names", pa.string()),
        # Grading: where per-test outcomes came from (junit | log; none: not graded, an agent's
        # empty patch, whose per-test counts are then null), and test infrastructure
        # files the patch changed (conftest.py, pytest.ini, tox.ini, ...; JSON list).
        pa.field("grading_channel", pa.string()),
        pa.field("test_infra_changed", pa.string()),
        # Naming contract (raydist.views.contracts): names the FAIL_TO_PASS tests call that only
        # the gold patch defines (JSON list; null: not computed), and whether the unit's patch
        # defines them all (null: no contract or no patch graded).
        pa.field("naming_contract", pa.string()),
        pa.field("contract_used", pa.bool_()),
        # Repository questions (SWE-QA, SchrodingerRepo RQ3; null for patch tasks): task is
        # "qa" (null or "patch": an issue to resolve); answer is the agent's submission in
        # original names (translated back from the view); qa_score the judge's Average Score
        # (0-100: SWE-QA's five 0-10 dimensions summed, times 2), qa_scores the five (JSON),
        # judge_model who judged; the judge's prompt and raw replies are grading/<unit>.judge.json.
        pa.field("task", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("qa_score", pa.float64()),
        pa.field("qa_scores", pa.string()),
        pa.field("judge_model", pa.string()),
        # Integrity (raydist.agents.integrity, rules in raydist/conf/integrity.yaml): the steps
        # that mined history, tampered with tests, reached for the network, read the answer
        # from outside the view or probed the grader, as a JSON list of {"step", "command" (as
        # typed), "rule", "category"}, and whether there is any. Null for a unit that ended in
        # an error and in files written before these columns existed (unknown, not 0).
        pa.field("integrity_flags", pa.string()),
        pa.field("integrity_flagged", pa.bool_()),
        pa.field("trajectory", pa.string()),
        pa.field("error", pa.string()),
        pa.field("finished_at", pa.string()),
    ]
)

#: The categories of ``integrity_flags`` (one per rule of ``raydist/conf/integrity.yaml``):
#: history mining, test tampering, network attempts, reading the answer from outside the view,
#: grader probing. Here, with the column, so results and analysis need no agent imports.
INTEGRITY_CATEGORIES = ("history_mining", "test_tampering", "network", "outside_view", "grader_probing")


def table_from_rows(rows: Iterable[Mapping], schema: pa.Schema, table: str) -> pa.Table:
    """``rows`` (dicts) as a table of ``schema``, in order; ``table`` names it in errors
    (e.g. ``"steps.parquet"``). A key a row lacks is a null, as ``pa.Table.from_pylist`` makes
    it, which only the nullable columns accept.

    Raises ``ValueError`` naming the table, the offending key and the columns when a row has a
    key that is no column (``from_pylist`` alone would drop its value without a word), or lacks
    a value for a non-nullable column (which Parquet would refuse later without naming the row)."""
    rows = list(rows)
    columns = set(schema.names)
    required = [f.name for f in schema if not f.nullable]
    for index, row in enumerate(rows):
        unknown = sorted(set(row) - columns)
        if unknown:
            raise ValueError(f"{table} row {index} has key(s) {', '.join(map(repr, unknown))}, which are no "
                             f"columns of {table}; the columns are {', '.join(schema.names)}")
        missing = [name for name in required if row.get(name) is None]
        if missing:
            raise ValueError(f"{table} row {index} lacks required column(s) {', '.join(map(repr, missing))}")
    return pa.Table.from_pylist(rows, schema=schema)


def conform_table(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """``table`` (read back from a file) with exactly ``schema``'s columns in its order: a
    column it lacks is null, every column cast to the schema's type. ``what`` names it in
    errors (e.g. ``"runs.parquet row of unit <key>"``).

    Raises ``ValueError`` naming ``what`` and the column for a column that is no column of
    ``schema`` (a file of another schema: refused, not dropped), or a non-nullable column
    that is missing or holds a null."""
    unknown = sorted(set(table.column_names) - set(schema.names))
    if unknown:
        raise ValueError(f"{what} has column(s) {', '.join(map(repr, unknown))}, which are no columns of the "
                         f"schema; the columns are {', '.join(schema.names)}")
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name).cast(field.type)
        else:
            column = pa.nulls(table.num_rows, field.type)
        if not field.nullable and column.null_count:
            raise ValueError(f"{what} lacks required column {field.name!r}")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


_DEFAULTS = {"resolved": False}

#: Keys a row produced by ``raydist.cluster.unit.execute_unit`` carries besides the columns:
#: the unit's step records (stored as its steps file), its files (trajectory, grading log:
#: written into the run directory) and a failing service's Retry-After (read by the
#: scheduler). They are never stored in the row.
TRANSIENT_KEYS = frozenset({"step_records", "files", "retry_after"})


def normalise_row(row: Mapping) -> dict:
    """A dict with exactly the schema's fields (missing nullable ones None).

    Raises ``KeyError`` naming a missing non-nullable field, or a key that is neither a column
    of ``RUNS_SCHEMA`` nor one of ``TRANSIENT_KEYS`` (with the columns listed): a value with no
    column would otherwise be lost without a word."""
    columns = RUNS_SCHEMA.names
    unknown = sorted(set(row) - set(columns) - TRANSIENT_KEYS)
    if unknown:
        raise KeyError(f"result row has key {unknown[0]!r}, which is no column of runs.parquet; "
                       f"the columns are {', '.join(columns)}")
    out = {}
    for field in RUNS_SCHEMA:
        value = row.get(field.name, _DEFAULTS.get(field.name))
        if value is None and not field.nullable:
            raise KeyError(f"result row lacks required field {field.name!r}")
        out[field.name] = value
    return out


# One row per executed command, for the action-mix (§IV RQ2) and leak (§III-F) analyses.
# ``command`` is as the agent wrote it (view coordinates), ``executed`` as it ran (original
# coordinates); ``input_tokens``/``output_tokens`` are the producing model call's, on the
# first command of that call only (0 for its other commands and for scripted agents).
STEPS_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("agent", pa.string(), nullable=False),
        pa.field("level", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        # The unit's ``attempt`` (runs.parquet's column; null in files written before it).
        pa.field("attempt", pa.int64()),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("command", pa.string(), nullable=False),
        pa.field("executed", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("returncode", pa.int64()),
        pa.field("seconds", pa.float64()),
        pa.field("timed_out", pa.bool_()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("leak_count", pa.int64()),
        pa.field("leaked_names", pa.string()),
        pa.field("memorised_count", pa.int64()),
        pa.field("memorised_names", pa.string()),
    ]
)

_UNIT_FIELDS = ("key", "instance_id", "model", "agent", "level", "seed", "attempt")


def step_rows(row: Mapping, records) -> list[dict]:
    """The rows of one unit for ``steps.parquet``: each of ``records`` (``ViewEnvironment.steps``
    dicts) with the unit fields of ``row`` added. Every key of a record is kept, so that
    :func:`table_from_rows` refuses one that is no column of ``STEPS_SCHEMA``.

    Raises ``ValueError`` naming a key of a record that is one of the unit fields (the row's
    value would replace the record's without a word)."""
    unit = {name: row.get(name) for name in _UNIT_FIELDS}
    out = []
    for record in records:
        shadowed = sorted(set(record) & set(_UNIT_FIELDS))
        if shadowed:
            raise ValueError(f"step record {record.get('step')!r} has key(s) {', '.join(map(repr, shadowed))}, "
                             f"which the unit's row gives; a step record carries only its command's fields")
        out.append(unit | dict(record))
    return out
