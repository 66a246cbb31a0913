"""The one outcome taxonomy (raydist.outcomes) on every path that ends a unit: the agent loop's
exits, model errors that must not be retried, exceptions inside a unit, the bounded retry."""

from __future__ import annotations

import errno
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest

from raydist.agents import AgentSettings, run_agent
from raydist.cluster.failures import Failure, error_row
from raydist.cluster.prepare import PreparationError, prepared_of
from raydist.cluster.unit import UnitSettings, execute_unit
from raydist.cluster.unit_key import RunUnit
from raydist.models import ModelEndpoint, ModelUnreachable
from raydist.models.retry import call_with_retries
from raydist.outcomes import InfrastructureError, InputError, RetryPolicy, agent_exit_of, classify_exception
from raydist.sandbox import ImageBuildError, SandboxUnavailable
from raydist.sandbox.settings import SandboxSettings
from raydist.tasks import load_instances
from raydist.views import PatchApplyError, View, ViewOptions


@pytest.mark.parametrize("status, cost, cost_limit, expected", [
    ("Submitted", 0.0, 3.0, "submitted"),
    ("LimitsExceeded", 0.0, 3.0, "step_limit"),
    ("LimitsExceeded", 3.5, 3.0, "cost_limit"),
    ("LimitsExceeded", 3.5, 0.0, "step_limit"),  # no cost limit: it was the step limit
    ("TimeExceeded", 0.0, 3.0, "time_limit"),
    ("RepeatedFormatError", 0.0, 3.0, "format_errors"),
    ("ModelError", 0.0, 3.0, "model_error"),
    ("ModelUnreachable", 0.0, 3.0, None),  # not the agent's end: infrastructure
])
def test_every_agent_exit_status_maps_to_one_agent_exit(status, cost, cost_limit, expected):
    assert agent_exit_of(status, cost=cost, cost_limit=cost_limit) == expected


@pytest.mark.parametrize("exc, expected", [
    (InputError("bad row", cause="no_test_cmd"), ("input_error", "no_test_cmd")),
    (InfrastructureError("server gone", cause="model_unreachable"), ("infrastructure_error", "model_unreachable")),
    (ModelUnreachable("no answer"), ("infrastructure_error", "model_unreachable")),
    (SandboxUnavailable("no daemon"), ("infrastructure_error", "docker")),
    (docker.errors.APIError("500 Server Error"), ("infrastructure_error", "docker")),
    (ImageBuildError("pip failed"), ("infrastructure_error", "image_build")),
    (OSError(errno.ENOSPC, "No space left on device"), ("infrastructure_error", "disk_full")),
    (MemoryError(), ("infrastructure_error", "host_out_of_memory")),
    (ConnectionRefusedError(), ("infrastructure_error", "connection")),
    (PatchApplyError("a.py: hunk 1 does not match"), ("input_error", "patch_does_not_apply")),
    (PreparationError("L1: every LLM call failed"), ("infrastructure_error", "view_preparation")),
    (KeyError("level"), ("bug", "KeyError")),
    (TypeError("unexpected keyword"), ("bug", "TypeError")),
    (OSError(errno.EACCES, "Permission denied"), ("bug", "PermissionError")),
])
def test_exceptions_are_classified_into_one_outcome_and_cause(exc, expected):
    assert classify_exception(exc) == expected


def test_the_retry_policy_backs_off_exponentially_honours_retry_after_and_stops_at_its_bound():
    policy = RetryPolicy(max_attempts=4, backoff_s=5, backoff_max_s=60)
    assert [policy.delay(n, "infrastructure_error") for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, None]
    assert policy.delay(1, "infrastructure_error", retry_after=30) == 30.0
    assert policy.delay(1, "infrastructure_error", retry_after=1000) == 60.0  # a server cannot stall a launch
    assert policy.delay(3, "infrastructure_error", retry_after=2) == 20.0  # the backoff is the floor
    for outcome in ("input_error", "bug", "resolved", "unresolved", None):
        assert policy.delay(1, outcome) is None
    with pytest.raises(ValueError, match="resume.max_attempts=0"):
        RetryPolicy(max_attempts=0)


# --- a model server that answers with an HTTP error -------------------------------------

class _Failing(BaseHTTPRequestHandler):
    """POST -> ``server.replies.pop(0)``: ``(status, body dict, headers)``; the last one repeats.
    Counts requests in ``server.calls``."""

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.calls.append(time.monotonic())
        status, body, headers = self.server.replies[0] if len(self.server.replies) == 1 else self.server.replies.pop(0)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def failing_model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    server.calls, server.replies = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


CONTEXT_TOO_LONG = (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your "
                                               "messages resulted in 9000 tokens.",
                                    "type": "invalid_request_error", "code": "context_length_exceeded"}}, {})
OK = (200, {"id": "c1", "object": "chat.completion", "created": 0, "model": "tiny",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}, {})


def _view() -> View:
    return View(instance_id="tiny-1", level="L0", seed=0, files={},
                problem_statement="In calc.py the function add returns a - b. It must return a + b.")


def test_a_context_too_long_400_ends_the_run_as_a_model_error_after_one_request(failing_model, tmp_path):
    """The model's own refusal is the run's end (unresolved, agent_exit=model_error), asked once:
    retrying it would get the same 400 forever. The first call fails, so no command runs and no
    sandbox is touched."""
    server, api_base = failing_model
    server.replies = [CONTEXT_TOO_LONG]
    outcome = run_agent(view=_view(), sandbox=None,
                        endpoint=ModelEndpoint("openai/tiny", api_base=api_base, local=True),
                        settings=AgentSettings(model_retries=3, grammar=False), trajectory_path=tmp_path / "t.json")
    assert outcome.exit_status == "ModelError"
    assert outcome.error.startswith("ContextWindowExceededError: ")
    assert "maximum context length is 8192 tokens" in outcome.error
    assert len(server.calls) == 1
    assert agent_exit_of(outcome.exit_status) == "model_error"


def test_a_server_that_stays_unavailable_is_retried_within_the_bound_then_is_an_infrastructure_error(failing_model):
    server, api_base = failing_model
    server.replies = [(503, {"error": {"message": "loading model", "type": "server_error"}}, {})]
    endpoint = ModelEndpoint("openai/tiny", api_base=api_base, local=True)
    import litellm

    with pytest.raises(ModelUnreachable, match="did not answer after 2 attempt") as caught:
        call_with_retries(lambda: litellm.completion(model="openai/tiny", api_base=api_base, api_key="x",
                                                     messages=[{"role": "user", "content": "hi"}], max_retries=0),
                          endpoint=endpoint, retries=2)
    assert len(server.calls) == 2
    assert classify_exception(caught.value) == ("infrastructure_error", "model_unreachable")


def test_a_rate_limited_call_waits_for_the_servers_retry_after(failing_model):
    server, api_base = failing_model
    server.replies = [(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "2"}), OK]
    endpoint = ModelEndpoint("openai/tiny", api_base=api_base, local=True)
    import litellm

    response = call_with_retries(lambda: litellm.completion(model="openai/tiny", api_base=api_base, api_key="x",
                                                            messages=[{"role": "user", "content": "hi"}],
                                                            max_retries=0),
                                 endpoint=endpoint, retries=3)
    assert response.choices[0].message.content == "hi"
    assert len(server.calls) == 2
    assert server.calls[1] - server.calls[0] >= 2.0  # not the 0.5 s backoff: what the server asked for


# --- exceptions inside a unit -----------------------------------------------------------

def _unit(instance_id="x") -> RunUnit:
    return RunUnit(instance_id, "h", "-", "null", "L0", 0, "c")


def _settings(**extra) -> UnitSettings:
    return UnitSettings(agent_kind="null", agent_settings=AgentSettings(), view_options=ViewOptions(),
                        cache_dir="/nonexistent", run_dir="/nonexistent",
                        sandbox=SandboxSettings(grading_timeout_s=60, **extra))


def test_an_exception_raised_by_raydist_itself_is_a_bug_with_its_traceback():
    row = execute_unit(_unit(), object(), _settings())  # not an instance: raydist's own code fails on it
    assert (row["outcome"], row["error_cause"], row["resolved"]) == ("bug", "AttributeError", False)
    assert row["error"].startswith("AttributeError: 'object' object has no attribute 'recipe'\nTraceback")
    assert "in _run" in row["error"]


def test_an_instance_without_a_test_command_is_an_input_error():
    [instance] = load_instances("builtin", limit=1)
    from dataclasses import replace

    row = execute_unit(_unit(instance.instance_id), replace(instance, test_cmd=""), _settings())
    assert (row["outcome"], row["error_cause"]) == ("input_error", "no_test_cmd")
    assert row["error"] == (f"UnitInputError: instance {instance.instance_id!r} has no test_cmd; "
                            "add one to the instance")


def test_a_docker_daemon_that_does_not_answer_is_an_infrastructure_error(tmp_path):
    [instance] = load_instances("builtin", limit=1)
    row = execute_unit(_unit(instance.instance_id), instance,
                       _settings(docker_host=f"unix://{tmp_path}/no-daemon.sock"))
    assert (row["outcome"], row["error_cause"]) == ("infrastructure_error", "docker")
    assert row["error"].startswith("SandboxUnavailable: ")


def test_a_failed_view_preparation_becomes_the_units_row_with_its_outcome_and_cause():
    unit = RunUnit("x", "h", "-", "oracle", "L1+L3", 2, "c")
    failure = Failure("infrastructure_error", "view_preparation",
                      "PreparationError: L1 for 'x' seed 2: every LLM call failed")
    prepared, got = prepared_of(unit, {}, {("x", 2, "L1"): failure})
    assert prepared is None
    row = error_row(unit, got)
    assert (row["outcome"], row["error_cause"], row["attempts"], row["resolved"]) == (
        "infrastructure_error", "view_preparation", 1, False)
    assert row["error"] == "L1 view preparation failed: PreparationError: L1 for 'x' seed 2: every LLM call failed"
    bug = Failure("bug", "KeyError", "KeyError: 'files'\nTraceback ...")
    _, got = prepared_of(unit, {}, {("x", 2, "L1"): bug})
    assert (error_row(unit, got)["outcome"], error_row(unit, got)["error_cause"]) == ("bug", "KeyError")
