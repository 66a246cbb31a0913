"""SWE-QA's judge, its loader and the question table: pure logic, no Docker, Ray or model."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from raydist.analysis.questions import question_table, split_questions
from raydist.outcomes import INFRASTRUCTURE_ERROR, classify_exception
from raydist.qa.judge import (
    DIMENSIONS,
    EMPTY_ANSWER,
    JUDGE_GRAMMAR,
    JudgeUnparseable,
    average_score,
    judge_answer,
    load_judge_prompt,
    parse_scores,
)
from raydist.results.schema import RUNS_SCHEMA
from raydist.tasks.schema import MalformedInstance
from raydist.tasks.swe_qa import citations, is_qa, load_swe_qa, release_match

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FIVE = {"correctness": 9, "completeness": 7, "relevance": 5, "clarity": 6, "reasoning": 4}


class Scripted:
    """A judge model playing back replies; records what it was sent."""

    def __init__(self, *replies: str):
        self.replies, self.calls = list(replies), []

    def __call__(self, messages, *, seed, max_tokens, grammar=None):
        self.calls.append({"messages": messages, "seed": seed, "grammar": grammar})
        return self.replies.pop(0)


def test_average_score_is_swe_qa_total_doubled():
    assert average_score(FIVE) == 62.0  # (9+7+5+6+4) = 31 of 50 -> 62 of 100
    assert average_score(dict.fromkeys(DIMENSIONS, 10)) == 100.0


@pytest.mark.parametrize("reply, expected", [
    (json.dumps(FIVE), FIVE),
    ("```json\n" + json.dumps(FIVE) + "\n```", FIVE),  # a hosted model's fenced reply
    (json.dumps(FIVE | {"note": "x"}), FIVE),
    (json.dumps(FIVE | {"clarity": 11}), None),  # out of range
    (json.dumps(FIVE | {"clarity": -1}), None),
    (json.dumps(FIVE | {"clarity": True}), None),  # a bool is no score
    (json.dumps(FIVE | {"clarity": 6.5}), None),
    (json.dumps({k: v for k, v in FIVE.items() if k != "reasoning"}), None),
    ("[9, 7, 5, 6, 4]", None),
    ("The answer is good.", None),
])
def test_parse_scores_takes_exactly_five_integers_0_to_10(reply, expected):
    assert parse_scores(reply) == expected


def test_judge_retries_an_unparseable_reply_with_the_next_seed_and_keeps_every_reply():
    model = Scripted("not json", json.dumps(FIVE))
    verdict = judge_answer("Q?", "ref", "cand", model, prompt=load_judge_prompt(), seed=3)
    assert (verdict.scores, verdict.score, verdict.replies) == (FIVE, 62.0, ("not json", json.dumps(FIVE)))
    assert [c["seed"] for c in model.calls] == [3, 4]
    assert model.calls[0]["grammar"] == JUDGE_GRAMMAR
    prompt = model.calls[0]["messages"][0]["content"]
    assert "Q?" in prompt and "ref" in prompt and "cand" in prompt


def test_a_judge_that_never_parses_is_an_infrastructure_error_not_the_agents_score():
    with pytest.raises(JudgeUnparseable) as caught:
        judge_answer("Q?", "ref", "cand", Scripted("a", "b"), prompt=load_judge_prompt(), attempts=2)
    assert caught.value.replies == ("a", "b")
    assert classify_exception(caught.value) == (INFRASTRUCTURE_ERROR, "judge_unparseable")


def test_an_empty_answer_scores_zero_without_a_judge_call():
    model = Scripted()
    verdict = judge_answer("Q?", "ref", "  \n", model, prompt=load_judge_prompt())
    assert (verdict.score, verdict.scores, verdict.note, model.calls) == (0.0, dict.fromkeys(DIMENSIONS, 0),
                                                                         EMPTY_ANSWER, [])


def test_citations_read_paths_quotes_and_names():
    answer = ("`to_apple_arch` in conan/tools/apple/apple.py calls `XCRun.sdk`:\n"
              "```2:3:/workspace/pkg/mod.py\ndef f():\n    return 1\n```\n")
    cited = citations(answer)
    assert cited.paths == ("conan/tools/apple/apple.py", "pkg/mod.py")
    assert cited.quotes == (("pkg/mod.py", 2, 3, "def f():\n    return 1\n"),)
    assert cited.names == ("to_apple_arch", "sdk")


def test_release_match_counts_what_the_release_reproduces(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text("import os\ndef f():\n    return 1\n")
    answers = ["`f` lives in pkg/mod.py:\n```2:3:pkg/mod.py\ndef f():\n    return 1\n```",
               "`g` in pkg/gone.py:\n```1:1:pkg/mod.py\ndef f():\n```"]
    match = release_match(answers, tmp_path)
    assert (match.paths_found, match.paths_cited, match.quotes_exact, match.quotes_cited, match.names_found,
            match.names_cited) == (1, 2, 1, 2, 1, 2)
    assert match.shares() == {"paths": 0.5, "quotes": 0.5, "names": 0.5}


def _qa_dir(tmp_path: Path, lines: list[str]) -> Path:
    (tmp_path / "repo_commit.txt").write_text("https://github.com/pallets/flask 85c5d93\n")
    (tmp_path / "flask.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


RELEASES = {"flask": {"name": "flask", "version": "3.1.2", "sha256": "ab" * 32}}


def test_load_swe_qa_makes_one_question_instance_per_line(tmp_path):
    folder = _qa_dir(tmp_path, [json.dumps({"question": "Why?", "answer": "Because."})])
    [instance] = load_swe_qa(folder, RELEASES, ["flask"])
    assert (instance.instance_id, instance.repo, instance.base_commit, instance.problem_statement, instance.patch,
            instance.FAIL_TO_PASS, instance.recipe.sdist.version, instance.recipe.install) == (
        "swe-qa__flask-001", "pallets/flask", "85c5d93", "Why?", "", (), "3.1.2", ())
    assert is_qa(instance) and instance.extra["reference_answer"] == "Because."


def test_load_swe_qa_names_the_bad_line_and_the_missing_release(tmp_path):
    folder = _qa_dir(tmp_path, [json.dumps({"question": "Why?", "answer": "Because."}), json.dumps({"question": "x"})])
    with pytest.raises(MalformedInstance, match=r"flask.jsonl:2: field 'answer'"):
        load_swe_qa(folder, RELEASES, ["flask"])
    with pytest.raises(ValueError, match=r"'requests' has no PyPI release in benchmark.releases"):
        load_swe_qa(folder, RELEASES, ["requests"])


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data is absent: SWE-QA's files live there")
def test_the_shared_swe_qa_files_load_48_questions_per_repository():
    from omegaconf import OmegaConf

    conf = OmegaConf.load(Path(__file__).resolve().parents[1] / "raydist/conf/benchmark/swe_qa.yaml")
    releases = OmegaConf.to_container(conf.releases)
    instances = load_swe_qa(SHARED / "swe_qa", releases, ["conan", "reflex", "streamlink", "flask", "requests"])
    assert len(instances) == 5 * 48 and len({i.instance_id for i in instances}) == 240


def _row(level, seed, instance, outcome, score, steps, task="qa"):
    scores = json.dumps(dict.fromkeys(DIMENSIONS, int(score // 10))) if score is not None else None
    return {"key": f"{level}{seed}{instance}", "instance_id": instance, "model": "m", "agent": "a", "level": level,
            "seed": seed, "config_hash": "c", "resolved": False, "outcome": outcome, "steps": steps,
            "input_tokens": 10 * steps, "output_tokens": 1, "cost": 0.0, "task": task, "qa_score": score,
            "qa_scores": scores}


def test_question_table_averages_over_seeds_and_counts_errors_apart():
    rows = [_row("L0", 0, "q1", "answered", 80.0, 2), _row("L0", 0, "q2", "answered", 60.0, 2),
            _row("L0", 1, "q1", "answered", 100.0, 4),
            _row("L2", 0, "q1", "answered", 40.0, 4), _row("L2", 0, "q2", "infrastructure_error", None, 0),
            _row("L0", 0, "p1", "resolved", None, 3, task=None)]
    table = pa.Table.from_pylist(rows, schema=pa.schema([RUNS_SCHEMA.field(k) for k in rows[0]]))
    patches, questions = split_questions(table)
    assert (patches.num_rows, questions.num_rows) == (1, 5)
    l0, l2 = question_table(questions)
    assert (l0["level"], l0["answered"], l0["seeds"], l0["score"], l0["score_std"]) == ("L0", 3, 2, 85.0,
                                                                                       pytest.approx(21.2132, 1e-4))
    assert l0["correctness"] == pytest.approx((8 + 6 + 10) / 3)
    assert (l2["score"], l2["delta"], l2["infrastructure_error"], l2["answered"]) == (40.0, -45.0, 1, 1)
    # actions: L0 mean (2+2+4)/3, L2 4 -> +50%
    assert l2["mean_steps_change"] == pytest.approx(50.0)


def test_cited_functions_are_those_enclosing_the_quotes_then_those_the_names_define(tmp_path):
    from raydist.tasks.schema import Instance
    from raydist.tasks.swe_qa import cited_functions
    from raydist.views import RepoFiles

    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text(
        "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n\n\ndef h():\n    pass\n")
    (tmp_path / "src" / "pkg" / "other.py").write_text("def h():\n    pass\n")
    answer = ("`h` matters, and in pkg/mod.py:\n```5:6:pkg/mod.py\n    def g(self):\n        return 2\n```\n"
              "`A.f` too. `missing` is nowhere.")
    instance = Instance("q", "o/r", "c", "", "", "Q?", (), (), "1", "", None,
                        {"task": "qa", "reference_answer": answer})
    # the quote first, then the names in the order the answer names them; other.py is not cited
    assert cited_functions(instance, RepoFiles(tmp_path)) == [("src/pkg/mod.py", "A.g"), ("src/pkg/mod.py", "h"),
                                                              ("src/pkg/mod.py", "A.f")]
    assert cited_functions(instance, RepoFiles(tmp_path), limit=1) == [("src/pkg/mod.py", "A.g")]
