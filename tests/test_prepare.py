"""View preparation (L1 statement, L4 rewrites): hunk ranges and targets on the built-in
instances' real repositories, the L4 test gate in real instance containers, the cache, and
the views the prepared records produce."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from raydist._util.storage import JsonCache
from raydist.cluster.prepare import PrepTask, preparation_tasks, prepared_for, task_key
from raydist.cluster.rewrites import prepare_rewrites, rewrite_gate
from raydist.cluster.unit_key import RunUnit
from raydist.grading import ContainerRunner
from raydist.sandbox import ensure_instance_image
from raydist.tasks import load_instances
from raydist.views import MissingPreparation, Prepared, RepoFiles, ViewOptions, build_view
from raydist.views.l4.prepare import GateVerdict, changed_line_ranges, rewrite_targets
from raydist.views.l4.rewrite import same_interface
from raydist.views.recover import apply_patch_to_texts

INSTANCES = {i.instance_id: i for i in load_instances("builtin")}
HUMANIZE = INSTANCES["jpvanhal__inflection-humanize-id-anchor"]
DEL_CONTROL = INSTANCES["jquast__wcwidth-del-control"]


def unit(iid: str, level: str, seed: int) -> RunUnit:
    return RunUnit(iid, "h", "m", "oracle", level, seed, "c")


def test_changed_line_ranges_are_the_removed_lines_of_each_hunk():
    assert changed_line_ranges(HUMANIZE.patch, "inflection/__init__.py") == [(197, 197)]
    assert changed_line_ranges(HUMANIZE.patch, "setup.py") == []


def test_pure_insertion_counts_as_the_line_before_it():
    patch = ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,4 @@\n def f():\n     x = 1\n+    x += 1\n     return x\n")
    assert changed_line_ranges(patch, "m.py") == [(2, 2)]


def test_preparation_tasks_dedupe_per_instance_seed_and_kind_in_first_use_order():
    units = [unit("a", "L0", 0), unit("a", "L1", 0), unit("a", "full", 0), unit("a", "L4+L3", 1), unit("b", "L2", 0)]
    assert preparation_tasks(units) == [PrepTask("a", 0, "L1"), PrepTask("a", 0, "L4"), PrepTask("a", 1, "L4")]


def test_task_key_changes_with_seed_options_and_model_only_where_they_matter(tmp_path):
    opts = ViewOptions()
    base = task_key(PrepTask("x", 0, "L1"), HUMANIZE, opts, "model-a")
    assert base == task_key(PrepTask("x", 0, "L1"), HUMANIZE, opts, "model-a")
    assert base != task_key(PrepTask("x", 1, "L1"), HUMANIZE, opts, "model-a")
    assert base != task_key(PrepTask("x", 0, "L1"), HUMANIZE, opts, "model-b")
    assert base != task_key(PrepTask("x", 0, "L1"), HUMANIZE, ViewOptions(l1_attempts=1), "model-a")
    # L4 without LLM attempts does not depend on the view model.
    no_llm = ViewOptions(l4_llm_attempts=0)
    assert task_key(PrepTask("x", 0, "L4"), HUMANIZE, no_llm, "a") == task_key(PrepTask("x", 0, "L4"), HUMANIZE,
                                                                                no_llm, "b")
    # The prompt files are part of the key.
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    for name in ("l1_paraphrase.j2", "l1_refine.j2", "l1_verify.j2"):
        (prompts / name).write_text("v1")
    first = task_key(PrepTask("x", 0, "L1"), HUMANIZE, ViewOptions(prompts_dir=str(prompts)), "m")
    (prompts / "l1_verify.j2").write_text("v2")
    assert first != task_key(PrepTask("x", 0, "L1"), HUMANIZE, ViewOptions(prompts_dir=str(prompts)), "m")


def test_cache_round_trip_and_a_corrupt_record_is_redone(tmp_path):
    cache = JsonCache(tmp_path / "views", indent=1)
    assert cache.get("k") is None
    cache.put("k", {"files": {"a.py": "x = 1\n"}, "functions": {}})
    assert cache.get("k") == {"files": {"a.py": "x = 1\n"}, "functions": {}}
    (tmp_path / "views" / "k.json").write_text("{not json")
    assert cache.get("k") is None


def test_l1_and_l4_views_need_their_prepared_inputs(tmp_path):
    (tmp_path / "m.py").write_text("def f(a):\n    return a\n")
    inst = HUMANIZE
    with pytest.raises(MissingPreparation, match="L1 view .* needs a prepared statement"):
        build_view(inst, RepoFiles(tmp_path), "L1", 0)
    with pytest.raises(MissingPreparation, match="L4 view .* needs prepared rewrites"):
        build_view(inst, RepoFiles(tmp_path), "full", 0, prepared=Prepared(statement="s", statement_source="canonical"))


def test_prepared_records_become_the_views_statement_and_files(tmp_path):
    (tmp_path / "m.py").write_text("def f(a):\n    return a\n")
    records = {"L1": {"text": "Paraphrased.", "source": "paraphrase", "attempts": 2, "history": []},
               "L4": {"files": {"m.py": "def f(a):\n    b = a\n    return b\n"},
                      "functions": {"m.py::f": {"source": "deterministic"}}}}
    view = build_view(HUMANIZE, RepoFiles(tmp_path), "L1+L4", 0, prepared=prepared_for("L1+L4", records))
    assert view.problem_statement == "Paraphrased."
    assert dict(view.files) == {"m.py": "def f(a):\n    b = a\n    return b\n"}
    assert (view.meta["l1_source"], view.meta["l1_attempts"], view.meta["l4_files"]) == ("paraphrase", 2, ["m.py"])
    # A level without L1 ignores the statement record.
    assert build_view(HUMANIZE, RepoFiles(tmp_path), "L4", 0,
                      prepared=prepared_for("L4", records)).problem_statement == HUMANIZE.problem_statement


# --- real repositories and the test gate in real containers -----------------------------


@pytest.fixture(scope="module")
def images(client):
    cache = Path.home() / ".cache" / "raydist"
    return {iid: ensure_instance_image(client, INSTANCES[iid].recipe, cache_dir=cache)
            for iid in (HUMANIZE.instance_id, DEL_CONTROL.instance_id)}


@pytest.mark.docker
def test_rewrite_targets_are_the_functions_around_the_gold_hunks(images):
    assert rewrite_targets(HUMANIZE, RepoFiles(images[HUMANIZE.instance_id].repo_dir)) == [
        ("inflection/__init__.py", "humanize")]
    assert rewrite_targets(DEL_CONTROL, RepoFiles(images[DEL_CONTROL.instance_id].repo_dir)) == [
        ("wcwidth/wcwidth.py", "wcwidth")]


@pytest.mark.docker
def test_gate_passes_a_behaviour_preserving_rewrite_and_names_what_breaks_otherwise(client, images):
    image = images[HUMANIZE.instance_id]
    repo = RepoFiles(image.repo_dir)
    gate = rewrite_gate(ContainerRunner(client, image.tag, timeout=300), HUMANIZE, repo)
    path = "inflection/__init__.py"
    original = repo.read(path)

    fixed = apply_patch_to_texts({path: original}, HUMANIZE.patch)[path]
    verdict = gate({path: fixed})
    assert verdict.passed is False
    assert "test_humanize_keeps_id_inside_a_word" in verdict.feedback  # the fix changes F2P's outcome

    broken = original.replace('word = word.replace(\'_\', \' \')', "word = word.replace('_', '-')")
    assert broken != original
    verdict = gate({path: broken})
    assert verdict.passed is False
    assert "passed before the rewrite and fail after it" in verdict.feedback
    assert "test_humanize" in verdict.feedback

    assert gate({path: original}) == GateVerdict(True, "")


@pytest.mark.docker
def test_prepare_rewrites_without_llm_gives_a_gated_deterministic_rewrite_per_seed(client, images):
    image = images[HUMANIZE.instance_id]
    repo = RepoFiles(image.repo_dir)
    gate = rewrite_gate(ContainerRunner(client, image.tag, timeout=300), HUMANIZE, repo)
    opts = ViewOptions(l4_llm_attempts=0)
    records = [prepare_rewrites(HUMANIZE, seed, repo, opts, gate) for seed in (0, 1)]
    path = "inflection/__init__.py"
    for record in records:
        assert list(record["files"]) == [path]
        assert record["functions"][f"{path}::humanize"]["source"] == "deterministic"
        assert same_interface(repo.read(path), record["files"][path], "humanize")
        assert gate(record["files"]).passed
    assert records[0]["files"][path] != records[1]["files"][path]
    assert records[0] == prepare_rewrites(HUMANIZE, 0, repo, opts, gate)  # seeded: same seed, same record


@pytest.mark.docker
def test_a_scripted_llm_rewrite_that_breaks_a_test_gets_the_failure_back_then_falls_back(client, images, tmp_path):
    """The LLM half is injected as a callable; this scripted one answers a rewrite that
    changes behaviour, so the test is about the retry loop and the fallback, not a model."""
    image = images[HUMANIZE.instance_id]
    repo = RepoFiles(image.repo_dir)
    gate = rewrite_gate(ContainerRunner(client, image.tag, timeout=300), HUMANIZE, repo)
    calls = []
    wrong = ('```python\ndef humanize(word: str) -> str:\n    """{doc}"""\n    return word.upper()\n```')
    import ast

    doc = ast.get_docstring(next(n for n in ast.parse(repo.read("inflection/__init__.py")).body
                                 if isinstance(n, ast.FunctionDef) and n.name == "humanize"), clean=False)

    def complete(messages, *, seed, max_tokens, grammar=None):
        calls.append(messages)
        return wrong.replace("{doc}", doc)

    record = prepare_rewrites(HUMANIZE, 0, repo, ViewOptions(l4_llm_attempts=2), gate, complete)
    entry = record["functions"]["inflection/__init__.py::humanize"]
    assert (entry["source"], entry["attempts"]) == ("deterministic", 2)
    assert len(calls) == 2
    assert "passed before the rewrite and fail after it" in entry["feedback"][0]
    assert "passed before the rewrite and fail after it" in calls[1][-1]["content"]


def test_a_dead_view_model_is_a_preparation_error_and_nothing_is_cached():
    from raydist.cluster.prepare import PreparationError, prepare_statement
    from raydist.models import ModelEndpoint
    from raydist.models.completion import litellm_complete
    from raydist.models.process import free_port

    dead = ModelEndpoint(litellm_model="openai/gemma3-270m", api_base=f"http://127.0.0.1:{free_port()}/v1",
                         local=True, grammar_server="llama_cpp")
    with pytest.raises(PreparationError, match="every LLM call failed"):
        prepare_statement(HUMANIZE, 0, litellm_complete(dead, timeout=5, retries=1), ViewOptions(l1_attempts=2))


# --- the view model's request timeout grows with the request's token budget --------------
# conftest's slow_model writes at server.tokens_per_s; each test sets it so that the request
# takes 1 s, then gives the view model a rate 5x slower (time to spare) or 4x faster (too little).

TINY_MODULE = "def f(a):\n    b = a + 1\n    return b\n"
TINY = SimpleNamespace(instance_id="tiny", patch=(
    "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(a):\n-    b = a + 1\n+    b = a + 2\n     return b\n"))


def timed_options(server_rate: float, factor: float, **options) -> ViewOptions:
    return ViewOptions(request_timeout_base_s=0.3, request_min_tokens_per_s=server_rate * factor, **options)


def slow_endpoint(api_base: str):
    from raydist.models import ModelEndpoint

    return ModelEndpoint(litellm_model="openai/gemma3-270m", api_base=api_base, local=True,
                         grammar_server="llama_cpp")


def test_an_l1_paraphrase_request_gets_time_for_its_token_budget(slow_model, tmp_path):
    from raydist.cluster.prepare import run_preparation
    from raydist.views.l1.statement import paraphrase_budget

    server, api_base = slow_model
    budget = paraphrase_budget(HUMANIZE.problem_statement, cap=ViewOptions().l1_max_tokens)
    server.tokens_per_s = budget  # the paraphrase takes 1 s
    record = run_preparation(PrepTask(HUMANIZE.instance_id, 0, "L1"), HUMANIZE,
                             timed_options(budget, 1 / 5, l1_attempts=1), endpoint=slow_endpoint(api_base),
                             cache_dir=str(tmp_path), grading_timeout_s=60)
    entry, rule = record["history"]
    assert (entry["error"], entry["candidate"], entry["rejected"]) == (None, "hello", "form")
    assert (rule["prompt"], record["source"] in ("rule", "canonical")) == ("rule", True)
    assert server.budgets[0] == budget  # then the verdict on the rule restatement


def test_an_l1_request_on_a_server_slower_than_the_rate_is_a_preparation_error(slow_model, tmp_path):
    from raydist.cluster.prepare import PreparationError, run_preparation
    from raydist.views.l1.statement import paraphrase_budget

    server, api_base = slow_model
    budget = paraphrase_budget(HUMANIZE.problem_statement, cap=ViewOptions().l1_max_tokens)
    server.tokens_per_s = budget
    with pytest.raises(PreparationError, match="every LLM call failed; last: ModelUnreachable: .*Timeout"):
        run_preparation(PrepTask(HUMANIZE.instance_id, 0, "L1"), HUMANIZE, timed_options(budget, 4, l1_attempts=1),
                        endpoint=slow_endpoint(api_base), cache_dir=str(tmp_path),
                        grading_timeout_s=60)


def test_an_l4_rewrite_request_gets_time_for_its_token_budget(slow_model, tmp_path):
    from raydist.cluster.prepare import view_model_complete
    from raydist.views.l4.llm import default_max_tokens
    from raydist.views.l4.splice import shown_function

    server, api_base = slow_model
    (tmp_path / "m.py").write_text(TINY_MODULE)
    budget = default_max_tokens(shown_function(TINY_MODULE, "f"))
    server.tokens_per_s = budget
    options = timed_options(budget, 1 / 5, l4_llm_attempts=1)
    record = prepare_rewrites(TINY, 0, RepoFiles(tmp_path), options, lambda files: GateVerdict(False, "no"),
                              view_model_complete(slow_endpoint(api_base), options))
    entry = record["functions"]["m.py::f"]
    assert entry["attempts"] == 1
    assert entry["feedback"][0].startswith("The rewrite was rejected before testing: no python code block")
    assert server.budgets == [budget]


def test_an_l4_request_on_a_server_slower_than_the_rate_is_a_preparation_error(slow_model, tmp_path):
    from raydist.cluster.prepare import PreparationError, view_model_complete
    from raydist.views.l4.llm import default_max_tokens
    from raydist.views.l4.splice import shown_function

    server, api_base = slow_model
    (tmp_path / "m.py").write_text(TINY_MODULE)
    budget = default_max_tokens(shown_function(TINY_MODULE, "f"))
    server.tokens_per_s = budget
    options = timed_options(budget, 4, l4_llm_attempts=1)
    with pytest.raises(PreparationError, match="L4 of 'tiny': model .* did not answer after 3 attempt.*Timeout"):
        prepare_rewrites(TINY, 0, RepoFiles(tmp_path), options, lambda files: GateVerdict(True, ""),
                         view_model_complete(slow_endpoint(api_base), options))


def test_the_timing_options_change_no_preparation_key():
    slow = ViewOptions(request_timeout_base_s=999, request_min_tokens_per_s=0.5)
    for kind in ("L1", "L4"):
        task = PrepTask("x", 0, kind)
        assert task_key(task, HUMANIZE, slow, "m") == task_key(task, HUMANIZE, ViewOptions(), "m")


def test_units_needing_preparation_get_new_keys_when_what_decides_it_changes(tmp_path):
    from raydist.cluster.unit_key import plan_units, unit_config_hash

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    for name in ("l1_paraphrase.j2", "l1_refine.j2", "l1_verify.j2", "l4_rewrite.j2", "l4_retry.j2"):
        (prompts / name).write_text("v1")

    def hashes(**options):
        view = {"prompts_dir": str(prompts), **options}
        planned = plan_units([HUMANIZE], model="m", agent="miniswe", levels=["L0", "L1", "L3+L4", "full"], seeds=[0],
                             agent_settings={}, view_options=view, environment={}, view_model_identity="model-a")
        return [u.config_hash for u in planned.units], unit_config_hash("miniswe", {}, view, {})

    before, plain = hashes()
    assert before[0] == plain and plain not in before[1:]  # only the levels that need preparation
    (prompts / "l1_verify.j2").write_text("v2")
    after, _ = hashes()
    assert [a == b for a, b in zip(before, after)] == [True, False, True, False]  # L0 and L4 keep theirs
    assert hashes(l4_llm_attempts=0)[0][2] != after[2]
