"""Content hashes keep their exact values: instance and recipe hashes (image names, unit keys),
seed-problem hashes (DyCodeEval keys) and the L1/L4 prompt digest (preparation cache keys).
The values below were computed before these hashes moved to ``raydist._util.hashing``."""

from __future__ import annotations

from raydist._util.hashing import stable_hash
from raydist.cluster.prepare import _prompt_digest
from raydist.problems.seeds import Problem
from raydist.tasks.schema import Instance, Recipe, Sdist

RECIPE = Recipe(Sdist("humanize", "4.9.0", "ab" * 32, "humanize-4.9.0.tar.gz"), ("pytest==8.0.0", "freezegun==1.4"),
                "pip install -e .", "--- a/x.py\n+++ b/x.py\n", "3.11")
INSTANCE = Instance(
    instance_id="humanize__ünï-1", repo="python-humanize/humanize", base_commit="4.9.0", patch="diff ünïcode ✓\n",
    test_patch="diff t\n", problem_statement="naturalsize — “wrong” ✓", FAIL_TO_PASS=("tests/test_a.py::test_x",),
    PASS_TO_PASS=("tests/test_a.py::test_y", "tests/test_b.py::test_z"), version="4.9", test_cmd="pytest -q",
    recipe=RECIPE, extra={"note": "é", "n": 3})
PROBLEM = Problem(problem_id="HumanEval/0", dataset="humaneval", prompt='def f(x):\n    """Dobbel — ✓"""\n',
                  entry_point="f", signature="def f(x):", canonical_solution="    return 2 * x\n",
                  tests=("assert f(2) == 4", "assert f('é') == 'éé'"), test_setup="", examples=("f(1) == 2",))


def test_stable_hash_of_non_ascii_text_keeps_its_value():
    assert stable_hash({"a": "é", "b": [1, 2.0]}) == "ea2b3c7f7d6d9413"
    assert stable_hash({"a": "é", "b": [1, 2.0]}, 64) == ("ea2b3c7f7d6d941302f39610889909f6"
                                                          "6b9c44c85841f213e099980e0a69209a")


def test_recipe_key_keeps_its_value():
    assert RECIPE.key() == "c52f5cdac867c4a3"


def test_instance_content_hash_keeps_its_value_with_non_ascii_fields():
    assert INSTANCE.content_hash() == "3e0c171869232db1"


def test_seed_problem_content_hash_keeps_its_value_with_non_ascii_fields():
    assert PROBLEM.content_hash() == "2117a93fd68ac95b"


def test_prompt_digest_keeps_its_value_and_marks_an_absent_file(tmp_path):
    (tmp_path / "l4_rewrite.j2").write_text("Rewrite {{ name }} — keep behaviour ✓\n", encoding="utf-8")
    (tmp_path / "l4_retry.j2").write_bytes(b"again\n")
    assert _prompt_digest(str(tmp_path), ("l4_rewrite.j2", "l4_retry.j2", "absent.j2")) == "e681f9476e0b06f5"
