"""The embedded Gemma model behind llama.cpp, served by the ModelServer Ray actor: lifecycle,
litellm, the action grammar, and real agent runs in containers. One shared server per
session; the lifecycle tests start their own so they can stop and kill them."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # bind Ray to 127.0.0.1

import pytest  # noqa: E402
import ray  # noqa: E402

from raydist.agents import AgentSettings, run_agent  # noqa: E402
from raydist.agents.loop import build_model  # noqa: E402
from raydist.agents.settings import load_prompts  # noqa: E402
from raydist.cluster.serving import server_arguments, server_command  # noqa: E402
from raydist.models import ModelEndpoint  # noqa: E402
from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY  # noqa: E402
from raydist.models.process import free_port  # noqa: E402
from raydist.models.server import ModelServer  # noqa: E402
from raydist.sandbox import Limits, as_provider, base_image_tag  # noqa: E402
from raydist.views.base import View  # noqa: E402

# isort: split
import litellm  # noqa: E402  (after raydist.models, which keeps litellm offline)

pytestmark = [pytest.mark.llm, pytest.mark.ray]
LITELLM_MODEL = "openai/gemma3-270m"  # local_models.gemma3-270m.litellm_model


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return not _alive(pid)


@pytest.fixture
def box(client):
    with as_provider(client).create(base_image_tag(), limits=Limits(memory="1g", pids=256), name="llm-test") as sandbox:
        sandbox.write_files({"calc.py": "def add(a, b):\n    return a - b\n"})
        yield sandbox


def tiny_view() -> View:
    return View(instance_id="tiny-1", level="L0", seed=0, files={},
                problem_statement="In calc.py the function add returns a - b. It must return a + b.")


def test_server_under_ray_answers_litellm(llama):
    actor, api_base = llama
    assert api_base.startswith("http://127.0.0.1:") and api_base.endswith("/v1")
    assert ray.get(actor.healthy.remote()) is True
    response = litellm.completion(model=LITELLM_MODEL, api_base=api_base, api_key=LOCAL_PLACEHOLDER_KEY,
                                  messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0)
    assert response.usage.prompt_tokens > 0 and 0 < response.usage.completion_tokens <= 8
    assert response.choices[0].message.content.strip() != ""


@pytest.fixture
def production_server(ray_local, gemma_entry):
    """A new ModelServer actor of the embedded model, started as ``raydist.cluster.serving`` does."""
    return lambda: ModelServer.options(num_cpus=0).remote(server_command(gemma_entry),
                                                          **server_arguments("gemma3-270m", gemma_entry))


def test_the_shipped_entry_is_the_model_these_tests_name(gemma_entry):
    assert gemma_entry["litellm_model"] == LITELLM_MODEL


def test_the_liveness_path_answers_at_once_while_both_slots_generate(llama):
    """The supervisor's hang check must not mistake a busy server for a hung one: with every
    slot generating, `/health` still answers well inside its default 10 s timeout."""
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    actor, api_base = llama
    root = api_base.removesuffix("/v1")
    long = {"model": "gemma3-270m", "messages": [{"role": "user", "content": "Count to one thousand."}],
            "max_tokens": 120, "temperature": 0, "ignore_eos": True}

    def generate() -> int:
        request = urllib.request.Request(f"{root}/v1/chat/completions", data=json.dumps(long).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)["usage"]["completion_tokens"]

    with ThreadPoolExecutor(2) as pool:
        busy = [pool.submit(generate) for _ in range(2)]
        time.sleep(1.5)  # both requests are decoding now (120 tokens take several seconds)
        assert not any(future.done() for future in busy)
        started = time.monotonic()
        with urllib.request.urlopen(f"{root}/health", timeout=5) as response:
            assert response.status == 200
        answered_in = time.monotonic() - started
        assert not any(future.done() for future in busy)  # it answered during the generation
        assert [future.result() for future in busy] == [120, 120]
    assert answered_in < 1.0
    assert ray.get(actor.healthy.remote()) is True


def test_a_grammar_the_server_cannot_parse_is_refused_as_a_bad_request(llama):
    _, api_base = llama
    with pytest.raises(litellm.BadRequestError, match="failed to parse grammar"):
        litellm.completion(model=LITELLM_MODEL, api_base=api_base, api_key=LOCAL_PLACEHOLDER_KEY, max_tokens=1,
                           messages=[{"role": "user", "content": "hi"}], extra_body={"grammar": "root ::= ("},
                           num_retries=0)


def test_server_process_is_gone_after_stop(production_server):
    actor = production_server()
    try:
        ray.get(actor.start.remote())
        pid = ray.get(actor.pid.remote())
        assert _alive(pid)
        ray.get(actor.stop.remote())
        assert _gone_within(pid, 10)
        assert (ray.get(actor.healthy.remote()), ray.get(actor.pid.remote())) == (False, None)
    finally:
        ray.kill(actor)


def test_server_process_dies_with_a_killed_actor(production_server):
    actor = production_server()
    ray.get(actor.start.remote())
    pid = ray.get(actor.pid.remote())
    assert _alive(pid)
    ray.kill(actor)
    assert _gone_within(pid, 15)


def test_grammar_makes_every_response_exactly_one_action(llama):
    _, api_base = llama
    # The grammar bounds the thought line at 200 characters, and digits are one token each: a
    # budget below that lets a looping thought ("100000...") be cut off before its command.
    settings = AgentSettings(max_tokens=400)
    model = build_model(ModelEndpoint(LITELLM_MODEL, api_base=api_base, local=True), settings,
                        load_prompts(settings.prompts_dir))
    asks = [
        "List the files in the current directory.",
        "Write a poem about the sea in three stanzas.",
        "Give two different shell commands, each in its own code block.",
        "Reply with a JSON object only.",
        "Show the first lines of calc.py, then explain them at length.",
    ]
    started = time.monotonic()
    for ask in asks:
        message = model.query([{"role": "user", "content": ask}])  # FormatError unless exactly one action
        actions = message["extra"]["actions"]
        assert len(actions) == 1
        assert "\n" not in actions[0]["command"] and actions[0]["command"]
        # The grammar admits only commands bash can parse: the action runs, whatever it does.
        syntax = subprocess.run(["bash", "-n", "-c", actions[0]["command"]], capture_output=True, text=True,
                                check=False)
        assert syntax.returncode == 0, (actions[0]["command"], syntax.stderr)
        assert message["content"].startswith("THOUGHT: ") and message["content"].endswith("\n```")
    elapsed = time.monotonic() - started
    print(f"\ngrammar: {len(asks)} calls, {model.output_tokens} completion tokens, {model.input_tokens} prompt tokens, "
          f"{elapsed:.1f} s, {model.output_tokens / elapsed:.1f} completion tokens/s")
    assert model.output_tokens > 0 and model.input_tokens > 0


@pytest.mark.docker
def test_gemma_agent_run_in_a_container(llama, box, tmp_path):
    _, api_base = llama
    path = tmp_path / "gemma.traj.json"
    started = time.monotonic()
    outcome = run_agent(view=tiny_view(), sandbox=box,
                        endpoint=ModelEndpoint(LITELLM_MODEL, api_base=api_base, local=True),
                        settings=AgentSettings(step_limit=3, command_timeout_s=30), trajectory_path=path)
    elapsed = time.monotonic() - started
    print(f"\nagent: {outcome.exit_status} after {outcome.steps} steps, {elapsed / max(outcome.steps, 1):.1f} s/step, "
          f"{outcome.input_tokens} prompt + {outcome.output_tokens} completion tokens")
    assert outcome.exit_status in {"Submitted", "LimitsExceeded"} and outcome.error is None
    assert 1 <= outcome.steps <= 3
    assert outcome.input_tokens > 0 and outcome.output_tokens > 0 and outcome.cost == 0.0
    saved = json.loads(path.read_text())
    assert saved == outcome.trajectory
    assert sum(m["role"] == "assistant" for m in saved["messages"]) == outcome.steps
    assert len(saved["info"]["commands"]) == outcome.steps  # the grammar makes every step one command
    # One command per call, so each call's tokens sit on its step and the steps sum to the totals.
    assert [s["step"] for s in outcome.step_records] == list(range(1, outcome.steps + 1))
    assert all(s["input_tokens"] > 0 and s["output_tokens"] > 0 for s in outcome.step_records)
    assert sum(s["input_tokens"] for s in outcome.step_records) == outcome.input_tokens
    assert sum(s["output_tokens"] for s in outcome.step_records) == outcome.output_tokens
    assert saved["info"]["model_stats"]["input_tokens"] == outcome.input_tokens
    assert LOCAL_PLACEHOLDER_KEY not in path.read_text()


@pytest.mark.docker
def test_unreachable_server_ends_the_run_with_a_clear_error(box, tmp_path):
    api_base = f"http://127.0.0.1:{free_port()}/v1"
    outcome = run_agent(view=tiny_view(), sandbox=box,
                        endpoint=ModelEndpoint(LITELLM_MODEL, api_base=api_base, local=True),
                        settings=AgentSettings(model_retries=2), trajectory_path=tmp_path / "dead.json")
    assert (outcome.exit_status, outcome.steps, outcome.input_tokens) == ("ModelUnreachable", 1, 0), outcome.error
    assert (outcome.step_records, outcome.leak_count) == ((), 0)
    assert f"at {api_base} did not answer after 2 attempt(s)" in outcome.error
    assert outcome.trajectory["messages"][-1]["role"] == "exit"


@pytest.mark.docker
def test_gemma_agent_on_an_l2_view_of_a_real_instance_sees_no_original_name(llama, client, tmp_path):
    """The exposure audit on a real model's run: whatever Gemma types (often original-looking
    names it guesses, or paths it invents), every observation it is shown, tracebacks
    included, names none of the repository's identity tokens, and neither does the statement;
    original names it types unseen are counted as memorised, never as shown."""
    from raydist.agents.environment import leak_count
    from raydist.cluster.workspace import install_view
    from raydist.sandbox import ensure_instance_image
    from raydist.tasks import load_instances
    from raydist.views import RepoFiles, build_view

    _, api_base = llama
    instance = next(i for i in load_instances("builtin") if i.instance_id == "benjaminp__six-ensure-text-errors")
    image = ensure_instance_image(client, instance.recipe, cache_dir=Path.home() / ".cache" / "raydist")
    view = build_view(instance, RepoFiles(image.repo_dir), "L2+L3", 1)
    assert leak_count(view, instance.problem_statement) == 4  # six, ensure_text, ensure_str, ensure_binary
    assert leak_count(view, view.problem_statement) == 0
    with as_provider(client).create(image.tag, limits=Limits(memory="1g", pids=256), name="llm-l2-test") as sandbox:
        install_view(sandbox, view)
        outcome = run_agent(view=view, sandbox=sandbox,
                            endpoint=ModelEndpoint(LITELLM_MODEL, api_base=api_base, local=True),
                            settings=AgentSettings(step_limit=4, command_timeout_s=30),
                            trajectory_path=tmp_path / "l2.traj.json")
    print(f"\nL2 agent: {outcome.exit_status} after {outcome.steps} steps; commands: "
          f"{[s['command'] for s in outcome.step_records]}")
    assert outcome.error is None and outcome.steps >= 1
    assert [s["leak_count"] for s in outcome.step_records] == [0] * len(outcome.step_records)
    assert (outcome.statement_leaks, outcome.leak_count) == (0, 0)
    shown = [m["content"] for m in outcome.trajectory["messages"] if m["role"] in ("user", "system")]
    assert all(leak_count(view, text) == 0 for text in shown)
