"""The recall probe's scoring (``raydist.recall``): gold read from real diffs, answers scored
raw and beyond what was revealed, the leakage level, and replies that do not parse."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from raydist.recall import (
    LEVELS,
    NO_ANSWER,
    ProbeAnswer,
    gold_of,
    level_of,
    parse_answer,
    score_answer,
)
from raydist.recall.gold import name_of_test
from raydist.recall.probe import score_reply

PATCH = """\
diff --git a/pkg/core/merge.py b/pkg/core/merge.py
--- a/pkg/core/merge.py
+++ b/pkg/core/merge.py
@@ -10,6 +10,6 @@ def combine(left, right):
     result = {}
     for key in left:
-        result[key] = left[key]
+        result[key] = deep_copy(left[key], memo=_MEMO_TABLE)
     return result
 
 
"""  # noqa: W293 - blank context lines of a diff are one space
TEST_PATCH = """\
diff --git a/pkg/tests/test_merge.py b/pkg/tests/test_merge.py
--- a/pkg/tests/test_merge.py
+++ b/pkg/tests/test_merge.py
@@ -1,1 +1,5 @@
 from pkg.core.merge import combine
+
+
+def test_combine_copies_nested_values():
+    assert combine({"a": [1]}, {}) == {"a": [1]}
"""
STATEMENT = "Merging two mappings shares nested lists between the result and the input."
GOLD = gold_of(PATCH, TEST_PATCH, ["pkg/tests/test_merge.py::test_combine_copies_nested_values"])


def test_gold_names_the_file_the_function_the_new_tokens_and_the_test():
    assert GOLD.files == ("pkg/core/merge.py",)
    assert GOLD.symbols == ("combine",)
    assert GOLD.repair == ("_MEMO_TABLE", "deep_copy", "memo")
    assert GOLD.fix_lines == ("result[key] = deep_copy(left[key], memo=_MEMO_TABLE)",)
    assert GOLD.test_names == ("test_combine_copies_nested_values",)


def test_a_patch_with_wrong_hunk_counts_is_still_read():
    loose = gold_of(PATCH.replace("@@ -10,6 +10,6 @@", "@@ -10,9 +10,2 @@"), "")
    assert (loose.files, loose.symbols, loose.fix_lines) == (GOLD.files, GOLD.symbols, GOLD.fix_lines)


def test_a_change_at_module_level_is_not_put_on_the_function_above_it():
    patch = ("diff --git a/s.py b/s.py\n--- a/s.py\n+++ b/s.py\n@@ -5,3 +5,3 @@ def helper(s):\n"
             "     return s\n \n-MODE = 0o600\n+MODE = 0o644\n")
    assert gold_of(patch, "").symbols == ()


@pytest.mark.parametrize(("test_id", "name"), [
    ("a/b.py::TestX::test_y[1-2]", "test_y"), ("test_y (app.tests.TestX)", "test_y"), ("test_z", "test_z")])
def test_a_test_id_gives_its_function_name(test_id, name):
    assert name_of_test(test_id) == name


def test_an_answer_naming_the_gold_file_gets_file_recall_one():
    scores = score_answer(ProbeAnswer(files=("pkg/core/merge.py",)), GOLD, STATEMENT)
    assert (scores.file_recall, scores.file_recall_beyond) == (1.0, 1.0)
    assert level_of(scores) == "files_symbols"


def test_an_answer_naming_a_wrong_file_gets_file_recall_zero():
    scores = score_answer(ProbeAnswer(files=("pkg/core/split.py", "merge.py")), GOLD, STATEMENT)
    assert (scores.file_recall, scores.file_recall_beyond) == (0.0, 0.0)  # a bare file name names no path
    assert level_of(scores) == "none"


def test_a_patch_copying_the_gold_hunk_overlaps_every_line_and_is_patch_level():
    scores = score_answer(ProbeAnswer(patch=PATCH), GOLD, STATEMENT)
    assert (scores.line_overlap, scores.line_overlap_beyond) == (1.0, 1.0)
    assert (scores.file_recall, scores.symbol_recall, scores.repair_recall) == (1.0, 1.0, 1.0)
    assert level_of(scores) == "patch_test"


def test_repair_logic_naming_the_new_tokens_is_repair_level():
    answer = ProbeAnswer(repair_logic="copy each value with deep_copy, passing memo=_MEMO_TABLE")
    scores = score_answer(answer, GOLD, STATEMENT)
    assert scores.repair_recall_beyond == 1.0
    assert level_of(scores) == "repair_logic"


def test_unrevealed_test_names_are_test_level():
    scores = score_answer(ProbeAnswer(tests=("test_combine_copies_nested_values",)), GOLD, STATEMENT)
    assert scores.test_recall_beyond == 1.0
    assert level_of(scores) == "patch_test"


def test_what_the_statement_names_does_not_raise_the_level():
    revealed = ("combine() in pkg/core/merge.py shares nested lists; the fix should call deep_copy with "
                "memo=_MEMO_TABLE. Failing: pkg/tests/test_merge.py::test_combine_copies_nested_values")
    answer = ProbeAnswer(files=("pkg/core/merge.py",), symbols=("combine",),
                         tests=("test_combine_copies_nested_values",),
                         repair_logic="call deep_copy with memo=_MEMO_TABLE")
    scores = score_answer(answer, GOLD, revealed)
    assert (scores.file_recall, scores.symbol_recall, scores.repair_recall, scores.test_recall) == (1.0,) * 4
    assert (scores.file_recall_beyond, scores.symbol_recall_beyond, scores.repair_recall_beyond,
            scores.test_recall_beyond) == (None,) * 4
    assert level_of(scores) == "none"
    assert level_of(score_answer(answer, GOLD, STATEMENT)) == "patch_test"  # the same answer, nothing revealed


def test_a_quoted_line_of_the_fix_is_no_patch_evidence():
    revealed = STATEMENT + "\nI tried `result[key] = deep_copy(left[key], memo=_MEMO_TABLE)` and it works."
    scores = score_answer(ProbeAnswer(patch=PATCH), GOLD, revealed)
    assert scores.line_overlap == 1.0 and scores.line_overlap_beyond is None
    assert level_of(scores) == "files_symbols"  # the file and function are still unrevealed


def test_listing_many_files_does_not_reach_recall_by_enumeration():
    files = [f"pkg/core/mod{i}.py" for i in range(10)] + ["pkg/core/merge.py"]
    answer = parse_answer(json.dumps({"files": files}))
    assert answer.files == tuple(files[:10])
    assert score_answer(answer, GOLD, STATEMENT).file_recall == 0.0


@pytest.mark.parametrize("reply", ["", "I think the bug is in merge.py", '{"files": "pkg/core/merge.py"',
                                   '{"verdict": 1}', '{"files": {"a": 1}}', '["pkg/core/merge.py"]'])
def test_a_reply_that_does_not_parse_is_no_answer(reply):
    assert parse_answer(reply) is None
    assert score_reply(reply, GOLD, {"problem_statement": STATEMENT}) == {"answered": False, "level": NO_ANSWER}


def test_a_fenced_reply_with_a_single_name_parses():
    reply = '```json\n{"files": "pkg/core/merge.py", "patch": ""}\n```'
    assert parse_answer(reply) == ProbeAnswer(files=("pkg/core/merge.py",))
    assert score_reply(reply, GOLD, {"problem_statement": STATEMENT})["level"] == "files_symbols"


def test_levels_are_ordered_lowest_first():
    assert LEVELS == ("none", "files_symbols", "repair_logic", "patch_test")


LITE = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench" / "swebench_lite.jsonl"


@pytest.mark.shared_data
@pytest.mark.skipif(not LITE.is_file(), reason=f"{LITE} (shared reference data) is absent")
def test_on_lite_the_gold_itself_is_patch_level_silence_is_none_and_named_files_are_no_evidence():
    from raydist.recall.rounds import DEFAULT_ROUNDS, revealed_fields, revealed_text
    from raydist.tasks import load_instances

    levels = {"gold": Counter(), "empty": Counter(), "files": Counter()}
    for instance in load_instances(str(LITE)):
        gold = gold_of(instance.patch, instance.test_patch, instance.FAIL_TO_PASS)
        shown = revealed_text(revealed_fields(instance, DEFAULT_ROUNDS[0]))
        answers = {"gold": ProbeAnswer(files=gold.files, symbols=gold.symbols, tests=gold.test_names,
                                       patch=instance.patch),
                   "empty": ProbeAnswer(), "files": ProbeAnswer(files=gold.files)}
        for name, answer in answers.items():
            levels[name][level_of(score_answer(answer, gold, shown))] += 1
    assert levels["gold"] == {"patch_test": 300}
    assert levels["empty"] == {"none": 300}
    # 90 of the 300 problem statements already name every file the fix edits
    assert levels["files"] == {"files_symbols": 210, "none": 90}
