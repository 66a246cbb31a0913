"""SWE-QA under views end to end (SchrodingerRepo RQ3): real SWE-QA questions on flask's PyPI
release, the embedded model as agent and as judge, Docker and Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.qa.judge import DIMENSIONS, average_score, parse_scores

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.llm,
              pytest.mark.skipif(not SHARED.exists(), reason="../shared/data is absent: SWE-QA's files live there")]

QA = ("benchmark=swe_qa", f"data_root={SHARED}")


def launch(out: Path, *overrides: str, repository: str = "flask", select: str = "benchmark.limit=1"
           ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raydist.launch", f"output_root={out}", *QA,
                           f"benchmark.repositories=[{repository}]", select, *overrides], cwd=ROOT,
                          capture_output=True, text=True, timeout=1500, check=False)


def rows(out: Path, agent: str, view: str) -> list[dict]:
    return pq.read_table(out / "swe_qa" / agent / "gemma3-270m" / view / "runs.parquet").to_pylist()


def reference(line: int) -> str:
    return json.loads((SHARED / "swe_qa" / "flask.jsonl").read_text().splitlines()[line - 1])["answer"]


def test_the_embedded_model_answers_at_l0_and_l2_and_the_judge_scores_each_answer(tmp_path):
    res = launch(tmp_path, "levels=[L0,L2]", "agents.miniswe.step_limit=4")
    assert res.returncode == 0, res.stderr[-3000:]
    got = rows(tmp_path, "miniswe", "L0_L2__s0")
    assert sorted((r["instance_id"], r["level"], r["outcome"], r["task"]) for r in got) == [
        ("swe-qa__flask-001", "L0", "answered", "qa"), ("swe-qa__flask-001", "L2", "answered", "qa")]
    run_dir = tmp_path / "swe_qa" / "miniswe" / "gemma3-270m" / "L0_L2__s0"
    for row in got:
        scores = json.loads(row["qa_scores"])
        assert sorted(scores) == sorted(DIMENSIONS) and row["qa_score"] == average_score(scores)
        assert row["judge_model"] == "gemma3-270m" and row["steps"] >= 1
        [record_file] = (run_dir / "grading").glob(f"swe-qa__flask-001__{row['level']}__s0__*.judge.json")
        record = json.loads(record_file.read_text())
        assert record["candidate"] == row["answer"] and record["reference"] == reference(1)
        if row["answer"]:  # judged: the last raw reply is the one scored
            assert record["replies"] and parse_scores(record["replies"][-1]) == scores
            assert record["messages"][0]["content"].count(reference(1)) == 1
        else:
            assert (record["replies"], row["qa_score"]) == ([], 0.0)
    summary = (run_dir / "summary.md").read_text()
    assert "## Answers (repository questions" in summary
    with open(run_dir / "report" / "swe-qa.csv") as f:
        table = f.read().splitlines()
    assert table[0].startswith("model,agent,level,answered,units,seeds,Average Score") and len(table) == 3


def test_the_oracle_answer_comes_back_from_the_views_and_l4_rewrites_the_functions_it_cites(tmp_path):
    # flask question 2's reference answer cites Blueprint methods of src/flask/sansio/blueprints.py.
    res = launch(tmp_path, "agent=oracle", "levels=[L2,L4]", "view.l4_llm_attempts=0",
                 select="benchmark.ids=[swe-qa__flask-002]")
    assert res.returncode == 0, res.stderr[-3000:]
    got = {row["level"]: row for row in rows(tmp_path, "oracle", "L2_L4__s0")}
    for row in got.values():
        assert row["outcome"] == "answered" and row["answer"] == reference(2).strip() and row["steps"] == 1
    # At L2 what the agent submitted was in the view's names; the row holds it translated back.
    [trajectory] = (tmp_path / "swe_qa" / "oracle" / "gemma3-270m" / "L2_L4__s0" / "trajectories").glob("*__L2__*")
    submitted = json.loads(trajectory.read_text())["messages"][-1]
    assert submitted["role"] == "exit" and submitted["content"].strip() != got["L2"]["answer"]
    # L4: the six cited functions, those the deterministic rewriter could change kept by flask's tests.
    meta = json.loads(got["L4"]["view_meta"])
    sources = [f["source"] for f in meta["l4_functions"].values()]
    assert meta["l4_files"] == ["src/flask/sansio/blueprints.py"] and got["L4"]["view_files"] == 1
    assert sorted(p.split("::")[0] for p in meta["l4_functions"]) == ["src/flask/sansio/blueprints.py"] * 6
    assert sources.count("deterministic") >= 1 and set(sources) <= {"deterministic", "unchanged"}
    res = launch(tmp_path, "agent=null", "levels=[L2]")
    assert res.returncode == 0, res.stderr[-3000:]
    [row] = rows(tmp_path, "null", "L2__s0")
    assert (row["outcome"], row["answer"], row["qa_score"]) == ("answered", "", 0.0)


def test_the_l4_gate_of_a_question_refuses_a_rewrite_that_breaks_a_passing_flask_test(tmp_path):
    import docker
    from omegaconf import OmegaConf

    from raydist.cluster.rewrites import rewrite_gate, with_passing_tests
    from raydist.grading import ContainerRunner
    from raydist.sandbox import ensure_instance_image
    from raydist.tasks.swe_qa import load_swe_qa
    from raydist.views import RepoFiles

    releases = OmegaConf.to_container(OmegaConf.load(ROOT / "raydist/conf/benchmark/swe_qa.yaml").releases)
    [instance] = load_swe_qa(SHARED / "swe_qa", releases, ["flask"])[1:2]
    client = docker.from_env()
    image = ensure_instance_image(client, instance.recipe, cache_dir=Path.home() / ".cache" / "raydist")
    measured = with_passing_tests(ContainerRunner(client, image.tag, timeout=600), instance)
    assert len(measured.PASS_TO_PASS) > 400 and "tests.test_blueprints::test_templates_list" in measured.PASS_TO_PASS
    repo = RepoFiles(Path(image.repo_dir))
    gate = rewrite_gate(ContainerRunner(client, image.tag, timeout=600), measured, repo)
    path = "src/flask/sansio/blueprints.py"
    text = repo.read(path)
    broken = text.replace("        self.name = name\n", '        self.name = name + "_"\n', 1)  # every endpoint renamed
    assert broken != text
    verdict = gate({path: broken})
    assert not verdict.passed and "passed before the rewrite and fail after it" in verdict.feedback
    assert gate({path: text}).passed


def test_a_question_at_a_level_with_l4_is_refused_when_its_repository_has_no_tests(tmp_path):
    res = launch(tmp_path, "levels=[L0,full]", repository="requests")
    assert res.returncode == 2
    assert "levels full include L4" in res.stderr and "the questions of psf/requests have no test command" in res.stderr


def test_a_judge_model_that_cannot_be_served_is_named_before_anything_runs(tmp_path):
    res = launch(tmp_path, "judge.model=no-such-model")
    assert res.returncode == 2
    assert res.stderr.startswith("raydist: error: judge.model=no-such-model: unknown model 'no-such-model'")
