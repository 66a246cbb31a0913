"""The view-aware environment and the scripted agents in real containers, and the agent's
plain-Python pieces (settings, prompts, truncation, trajectory redaction)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from minisweagent.exceptions import Submitted

from raydist.agents import AgentSettings, ViewEnvironment, load_prompts, null, oracle, save_trajectory, truncate_middle
from raydist.agents.environment import leak_count
from raydist.agents.outcome import RecordingAgent, exposure_columns
from raydist.agents.scripted import SUBMIT_COMMAND, ScriptedModel, write_file_commands
from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
from raydist.sandbox import Limits, as_provider, base_image_tag, ensure_instance_image
from raydist.tasks import load_instances
from raydist.views import RepoFiles, ViewOptions, build_view
from raydist.views.audit import IdentitySet, find_exposures
from raydist.views.base import IDENTITY, View
from raydist.views.l2.namespace import namespace_level  # noqa: F401  (registers L2)

#: What `cat toolz/itertoolz.py` names, untranslated and cut to the observation limit.
RAW_CAT = {"concatv", "cons", "groupby", "interleave", "interpose", "isdistinct", "isiterable", "mapcat",
           "merge_sorted", "partition_all", "peekn", "pluck", "random_sample", "reduceby", "sliding_window",
           "take_nth", "toolz", "topk"}
CACHE = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))

ORIGINAL = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "util/text.py": "GREETING = 'hello'\n",
}
GOLD_PATCH = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
diff --git a/util/text.py b/util/text.py
deleted file mode 100644
--- a/util/text.py
+++ /dev/null
@@ -1 +0,0 @@
-GREETING = 'hello'
diff --git a/util/new.py b/util/new.py
new file mode 100644
--- /dev/null
+++ b/util/new.py
@@ -0,0 +1 @@
+NEW = "é"
"""


class RenameTranslator:
    """The agent sees module `calc` as `arith`."""

    def to_original(self, command: str) -> str:
        return command.replace("arith", "calc")

    def to_view(self, text: str) -> str:
        return text.replace("calc", "arith")


class UsageModel(ScriptedModel):
    """Plays back responses of one or more commands, each with the token usage a server reports."""

    def __init__(self, responses: list[tuple[list[str], int, int]], observation_template: str):
        super().__init__("usage", [], observation_template)
        self._responses = list(responses)

    def query(self, messages: list[dict], **kwargs) -> dict:
        commands, input_tokens, output_tokens = self._responses.pop(0)
        extra = {"actions": [{"command": c} for c in commands], "cost": 0.0,
                 "input_tokens": input_tokens, "output_tokens": output_tokens}
        return {"role": "assistant", "content": "THOUGHT: scripted.", "extra": extra}


def without_seconds(records) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


class Task:
    instance_id = "tiny-1"
    problem_statement = "add() subtracts; make it add."
    patch = GOLD_PATCH


def banner(path: str, text: str) -> str:
    """A view presentation: a comment line on top of every file."""
    return f"# view of {path}\n{text}"


def tiny_view(translator=IDENTITY, renderers=(), identity=None) -> View:
    files = {p: banner(p, t) for p, t in ORIGINAL.items()} if renderers else {}
    return View(instance_id="tiny-1", level="L0", seed=0, problem_statement=Task.problem_statement,
                files=files, translator=translator, renderers=renderers, identity=identity)


def settings(**overrides) -> AgentSettings:
    return AgentSettings(**({"command_timeout_s": 30.0} | overrides))


# --- plain Python -------------------------------------------------------------------------


def test_truncate_middle_keeps_head_and_tail():
    assert truncate_middle("0123456789", 4) == "01\n[... 6 characters elided ...]\n89"
    assert truncate_middle("short", 10) == "short"
    assert truncate_middle("unlimited", 0) == "unlimited"


def test_leak_count_refuses_a_view_without_identity_tokens():
    with pytest.raises(ValueError, match=r"cannot count leaks for view 'tiny-1': it carries identity=None, no identity "
                                         r"tokens of the original repository to search for; build it with "
                                         r"raydist.views.build_view"):
        leak_count(tiny_view(), "calc.py")
    with pytest.raises(ValueError, match="it carries an empty IdentitySet"):
        leak_count(tiny_view(identity=IdentitySet(origins={})), "calc.py")
    assert leak_count(tiny_view(identity=IdentitySet(origins={"calc": "module"})), "cat calc.py") == 1


def test_a_rows_exposure_columns_refuse_a_view_without_identity_tokens():
    # A row's leak and memorisation counts are measured against the view's identity tokens;
    # without them every count would be 0 by construction.
    with pytest.raises(ValueError, match=r"no exposure audit for view 'tiny-1': it carries no identity tokens"):
        exposure_columns(tiny_view(), [])
    with pytest.raises(ValueError, match=r"no exposure audit for view 'tiny-1'"):
        exposure_columns(tiny_view(identity=IdentitySet(origins={})), [])
    columns = exposure_columns(tiny_view(identity=IdentitySet(origins={"calc": "module"})),
                               [{"leaked_names": ["calc"], "memorised_names": []}])
    assert (columns["leak_count"], columns["leaked_names"], columns["memorised_count"]) == (1, '["calc"]', 0)


def test_settings_refuse_negative_limits():
    with pytest.raises(ValueError, match=r"AgentSettings.step_limit must be >= 0, got -1"):
        AgentSettings(step_limit=-1)


def test_missing_prompt_template_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"system\.j2 is missing"):
        load_prompts(tmp_path)


def test_default_prompts_show_the_action_fence():
    prompts = load_prompts(AgentSettings().prompts_dir)
    assert "```mswea_bash_command" in prompts.instance and "{{task}}" in prompts.instance


def test_saved_trajectory_redacts_env_keys_and_the_local_placeholder(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-0123456789")
    data = {"messages": [{"content": f"key sk-secret-0123456789 and {LOCAL_PLACEHOLDER_KEY}"}]}
    clean = save_trajectory(data, tmp_path / "t.json")
    assert clean == {"messages": [{"content": "key <redacted> and <redacted>"}]}
    assert json.loads((tmp_path / "t.json").read_text()) == clean


def test_write_file_commands_quote_paths_and_delete():
    assert write_file_commands("a b.py", None) == ["rm -f -- 'a b.py'"]
    assert write_file_commands("x.py", "hi") == [
        'mkdir -p -- "$(dirname -- x.py)" && printf %s aGk= | base64 -d > x.py']


# --- real containers ----------------------------------------------------------------------


@pytest.fixture
def box(client):
    limits = Limits(memory="1g", pids=256)
    with as_provider(client).create(base_image_tag(), limits=limits, name="agents-test") as sandbox:
        sandbox.write_files(ORIGINAL)
        yield sandbox


@pytest.mark.docker
def test_environment_translates_command_and_output(box):
    env = ViewEnvironment(box, tiny_view(RenameTranslator()), timeout=30)
    out = env.execute({"command": "cat arith.py && echo calc"})
    assert out["output"] == "def add(a, b):\n    return a - b\narith\n"
    assert out["returncode"] == 0 and out["exception_info"] == ""
    assert env.steps[0]["command"] == "cat arith.py && echo calc"
    assert env.steps[0]["executed"] == "cat calc.py && echo calc"
    assert (env.steps[0]["step"], env.steps[0]["returncode"], env.steps[0]["timed_out"]) == (1, 0, False)
    assert (env.steps[0]["category"], env.steps[0]["leak_count"]) == ("read", 0)  # a view without identity: 0
    assert env.serialize()["info"]["view"] == {"instance": "tiny-1", "level": "L0", "seed": 0}


@pytest.mark.docker
def test_environment_raises_submitted_with_the_rest_of_the_output(box):
    env = ViewEnvironment(box, tiny_view(), timeout=30)
    with pytest.raises(Submitted) as raised:
        env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo done"})
    assert raised.value.messages[0]["extra"] == {"exit_status": "Submitted", "submission": "done\n"}


@pytest.mark.docker
def test_environment_does_not_submit_on_failing_command(box):
    env = ViewEnvironment(box, tiny_view(), timeout=30)
    out = env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; exit 2"})
    assert out["returncode"] == 2


@pytest.mark.docker
def test_environment_truncates_long_output(box):
    env = ViewEnvironment(box, tiny_view(), timeout=30, output_limit_chars=10)
    out = env.execute({"command": "printf 'abcdefghijklmnopqrstuvwxyz'"})
    assert out["output"] == "abcde\n[... 16 characters elided ...]\nvwxyz"


@pytest.mark.docker
def test_environment_reports_timeout(box):
    env = ViewEnvironment(box, tiny_view(), timeout=1)
    out = env.execute({"command": "sleep 30"})
    assert (out["returncode"], env.steps[0]["timed_out"]) == (124, True)
    assert out["exception_info"] == "the command was killed after 1 s"


@pytest.mark.docker
def test_oracle_writes_the_gold_patch_as_the_view_shows_it(box, tmp_path):
    view = tiny_view(renderers=(banner,))
    box.write_files(dict(view.files))
    outcome = oracle(view=view, sandbox=box, instance=Task, read_original=ORIGINAL.get, settings=settings(),
                     trajectory_path=tmp_path / "oracle.traj.json")
    assert (outcome.exit_status, outcome.steps, outcome.error, outcome.cost) == ("Submitted", 4, None, 0.0)
    files = box.read_files(["calc.py", "util/text.py", "util/new.py"])
    assert files == {
        "calc.py": b"# view of calc.py\ndef add(a, b):\n    return a + b\n",
        "util/text.py": None,
        "util/new.py": '# view of util/new.py\nNEW = "é"\n'.encode(),
    }
    saved = json.loads((tmp_path / "oracle.traj.json").read_text())
    assert saved["trajectory_format"] == "mini-swe-agent-1.1" and saved["info"]["exit_status"] == "Submitted"
    assert [m["role"] for m in saved["messages"]] == (
        ["system", "user"] + ["assistant", "user"] * 3 + ["assistant", "exit"])


@pytest.mark.docker
def test_oracle_writes_files_larger_than_one_shell_argument(box):
    big = "".join(f"line {i}\n" for i in range(40000))  # ~390 KB, ~520 KB base64: six commands
    task = type("Big", (), {"patch": "--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,40000 @@\n"
                            + "".join("+" + line for line in big.splitlines(keepends=True)),
                            "problem_statement": "x"})
    outcome = oracle(view=tiny_view(), sandbox=box, instance=task, read_original=ORIGINAL.get, settings=settings())
    assert (outcome.exit_status, outcome.steps, outcome.error) == ("Submitted", 7, None)
    assert box.read_files(["big.txt"])["big.txt"] == big.encode()


@pytest.mark.docker
def test_null_submits_without_editing(box, tmp_path):
    outcome = null(view=tiny_view(), sandbox=box, settings=settings(), trajectory_path=tmp_path / "null.json")
    assert (outcome.exit_status, outcome.steps, outcome.input_tokens, outcome.error) == ("Submitted", 1, 0, None)
    assert box.read_files(["calc.py"]) == {"calc.py": ORIGINAL["calc.py"].encode()}
    assert json.loads((tmp_path / "null.json").read_text())["info"]["commands"][0]["command"] == (
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    )


@pytest.mark.docker
def test_environment_records_category_tokens_and_leaks_of_the_shown_output(box):
    """The audit searches for the repository's names, not for what the translator renames: the
    upper-case CALC it leaves is a leak; the middle name is elided, so the agent saw one."""
    identity = IdentitySet(origins={"calc": "module", "greeting": "function"})
    env = ViewEnvironment(box, tiny_view(RenameTranslator(), identity=identity), timeout=30, output_limit_chars=10)
    out = env.execute({"command": "printf CALCxxxxxxxxxxGREETINGxxxxxxxxxxCALC", "input_tokens": 120,
                       "output_tokens": 9})
    env.execute({"command": "cat arith.py"})
    assert out["output"] == "CALCx\n[... 26 characters elided ...]\nxCALC"
    assert without_seconds(env.steps) == [
        {"step": 1, "command": "printf CALCxxxxxxxxxxGREETINGxxxxxxxxxxCALC",
         "executed": "printf CALCxxxxxxxxxxGREETINGxxxxxxxxxxCALC", "category": "other", "returncode": 0,
         "timed_out": False, "input_tokens": 120, "output_tokens": 9, "leak_count": 1, "leaked_names": '["calc"]',
         # calc is hidden (the view shows arith) and the agent typed it unseen: memory, not the view.
         "memorised_count": 1, "memorised_names": '["calc"]'},
        {"step": 2, "command": "cat arith.py", "executed": "cat calc.py", "category": "read", "returncode": 0,
         "timed_out": False, "input_tokens": 0, "output_tokens": 0, "leak_count": 0, "leaked_names": "[]",
         "memorised_count": 0, "memorised_names": "[]"},
    ]


@pytest.mark.docker
def test_a_calls_tokens_go_to_its_first_command_only(box):
    prompts = load_prompts(settings().prompts_dir)
    env = ViewEnvironment(box, tiny_view(), timeout=30)
    model = UsageModel([(["ls", "cat calc.py"], 100, 7), ([SUBMIT_COMMAND], 130, 2)], prompts.observation)
    agent = RecordingAgent(model, env, system_template=prompts.system, instance_template=prompts.instance,
                           step_limit=0, cost_limit=0)
    assert agent.run(task="t")["exit_status"] == "Submitted"
    assert [(s["command"], s["category"], s["input_tokens"], s["output_tokens"]) for s in env.steps] == [
        ("ls", "navigate", 100, 7), ("cat calc.py", "read", 0, 0), (SUBMIT_COMMAND, "submit", 130, 2)]


@pytest.fixture(scope="module")
def toolz_l2(client, toolz_src):
    """An L2 view of the real toolz 1.0.0 and a sandbox holding its Python files at /testbed."""
    repo = RepoFiles(toolz_src)
    task = SimpleNamespace(instance_id="toolz-l2", repo="pytoolz/toolz", patch="", test_patch="",
                           problem_statement="merge_sorted in toolz/itertoolz.py drops keys")
    view = build_view(task, repo, "L2", 0)
    limits = Limits(memory="1g", pids=256)
    with as_provider(client).create(base_image_tag(), limits=limits, name="agents-l2") as sandbox:
        sandbox.write_files({path: repo.read(path) for path in repo.python_files()})
        yield view, sandbox


@pytest.mark.docker
@pytest.mark.parametrize("original, category, raw_leaks, shown_leaks", [
    # groupby is also itertools.groupby, so L2 keeps it (its manifest says so) and the audit counts it.
    ("cat toolz/itertoolz.py", "read", RAW_CAT, {"groupby"}),
    ("python -c 'from toolz.itertoolz import merge_sorted; list(merge_sorted([1, 2], [\"a\"]))'", "probe",
     {"itertoolz", "merge_sorted", "toolz"}, set()),
])
def test_l2_observations_show_only_the_names_the_view_keeps(toolz_l2, original, category, raw_leaks, shown_leaks):
    view, sandbox = toolz_l2
    env = ViewEnvironment(sandbox, view, timeout=60)
    command = view.translator.to_view(original)
    assert command != original
    out = env.execute({"command": command})
    step = env.steps[0]
    assert (step["executed"], step["category"], step["leak_count"]) == (original, category, len(shown_leaks))
    assert find_exposures(out["output"], view.identity) == shown_leaks
    assert json.loads(step["leaked_names"]) == sorted(shown_leaks)
    assert shown_leaks <= set(view.meta["l2_unmapped"])
    untranslated = sandbox.exec(original, timeout=60, cwd="/testbed", env=env.config.env).output
    assert find_exposures(truncate_middle(untranslated, env.config.output_limit_chars), view.identity) == raw_leaks


@pytest.mark.docker
def test_original_names_the_agent_types_unseen_work_and_are_counted_as_memorised(toolz_l2):
    view, sandbox = toolz_l2
    env = ViewEnvironment(sandbox, view, timeout=60)
    typed = "python -c 'from toolz.itertoolz import merge_sorted; print(list(merge_sorted([1, 3], [2])))'"
    out = env.execute({"command": typed})
    assert (out["returncode"], out["output"], env.steps[0]["executed"]) == (0, "[1, 2, 3]\n", typed)
    step = env.steps[0]
    assert (step["memorised_count"], step["memorised_names"]) == (3, '["itertoolz", "merge_sorted", "toolz"]')
    assert (step["leak_count"], step["leaked_names"]) == (0, "[]")
    env.execute({"command": view.translator.to_view("ls toolz")})
    assert env.steps[1]["memorised_count"] == 0  # written in virtual names


@pytest.mark.docker
def test_oracle_on_a_builtin_l2_instance_edits_then_submits_with_no_tokens_and_no_leaks(client):
    instance = load_instances("builtin")[0]
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id)
    repo = RepoFiles(Path(image.repo_dir))
    view = build_view(instance, repo, "L2", 0)
    limits = Limits(memory="1g", pids=256)
    with as_provider(client).create(image.tag, limits=limits, name="agents-oracle-l2") as sandbox:
        outcome = oracle(view=view, sandbox=sandbox, instance=instance, read_original=repo.read, settings=settings())
    assert (outcome.exit_status, outcome.error) == ("Submitted", None)
    assert [(s["step"], s["category"], s["input_tokens"], s["output_tokens"], s["leak_count"])
            for s in outcome.step_records] == [(1, "edit", 0, 0, 0), (2, "submit", 0, 0, 0)]
    assert outcome.step_records[0]["executed"] == view.translator.to_original(outcome.step_records[0]["command"])
    assert outcome.action_counts == {"submit": 1, "edit": 1, "test": 0, "probe": 0, "read": 0, "search": 0,
                                     "navigate": 0, "other": 0}
    # The statement shown is translated by the view; untranslated it would name the repository.
    assert find_exposures(instance.problem_statement, view.identity) == {"humanize", "inflection", "titleize"}
    assert find_exposures(view.problem_statement, view.identity) == set()
    columns = exposure_columns(view, outcome.step_records)
    assert {k: columns[k] for k in ("leak_count", "leaked_names", "unmapped_names", "memorised_count")} == {
        "leak_count": 0, "leaked_names": "[]", "unmapped_names": 0, "memorised_count": 0}
    assert columns["audit"]["unmapped"] == {} and columns["audit"]["statement"] == []


@pytest.mark.docker
def test_oracle_applies_a_gold_patch_that_only_applies_with_fuzz(client):
    """SWE-bench applies a gold patch with `patch --fuzz=5` when git apply refuses it; such
    instances exist in SWE-bench Verified. Here one context line of the real gold hunk
    differs from the base."""
    import dataclasses

    instance = load_instances("builtin", ids=["jquast__wcwidth-del-control"])[0]
    fuzzy = dataclasses.replace(instance, patch=instance.patch.replace("     # C0/C1 control characters",
                                                                       "     # C0/C1 control chars"))
    assert fuzzy.patch != instance.patch
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id)
    repo = RepoFiles(image.repo_dir)
    view = build_view(fuzzy, repo, "L0", 0, ViewOptions(), None)
    limits = Limits(memory="1g", pids=256)
    with as_provider(client).create(image.tag, limits=limits, name="agents-oracle-fuzz") as sandbox:
        methods = []
        outcome = oracle(view=view, sandbox=sandbox, instance=fuzzy, read_original=repo.read, settings=settings(),
                         on_gold_applied=methods.append)
        assert (outcome.exit_status, outcome.error, methods) == ("Submitted", None, ["patch-fuzz"])
        fixed = sandbox.read_files(["wcwidth/wcwidth.py"])["wcwidth/wcwidth.py"].decode()
    assert fixed == repo.read("wcwidth/wcwidth.py").replace("or 0x07F < ucs < 0x0A0", "or 0x07F <= ucs < 0x0A0")
