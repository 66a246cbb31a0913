"""`litellm_complete` through real litellm against a minimal OpenAI-compatible HTTP endpoint on
loopback that records each request body and answers with a fixed message, against one that
takes time in proportion to the token budget (conftest's ``slow_model``), and against a port
where nothing listens."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raydist.models import EmptyCompletion, ModelEndpoint, ModelUnreachable, litellm_complete
from raydist.models.completion import request_timeout
from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
from raydist.models.process import free_port

MESSAGES = [{"role": "user", "content": "Say hello."}]


class Recorder(BaseHTTPRequestHandler):
    """POST /v1/chat/completions -> one choice with `server.answer`; keeps what was sent."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        reply = json.dumps({
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.server.answer}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen, server.answer = [], "hello"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_local_call_sends_seed_budget_grammar_and_placeholder_key(endpoint_server):
    server, api_base = endpoint_server
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True), temperature=0.2)
    assert complete(MESSAGES, seed=7001, max_tokens=64, grammar='root ::= "hello"') == "hello"
    (seen,) = server.seen
    assert seen["path"] == "/v1/chat/completions" and seen["auth"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"
    body = seen["body"]
    assert (body["model"], body["messages"], body["seed"], body["max_tokens"], body["temperature"]) == (
        "tiny", MESSAGES, 7001, 64, 0.2)
    assert body["grammar"] == 'root ::= "hello"'


def test_usage_sums_tokens_and_calls(endpoint_server):
    _, api_base = endpoint_server
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True))
    complete(MESSAGES, seed=1, max_tokens=8)
    complete(MESSAGES, seed=2, max_tokens=8)
    assert complete.usage == {"input_tokens": 22, "output_tokens": 8, "calls": 2}


def test_hosted_endpoint_gets_no_grammar(endpoint_server, monkeypatch):
    server, api_base = endpoint_server
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base))
    complete(MESSAGES, seed=1, max_tokens=8, grammar='root ::= "hello"')
    assert "grammar" not in server.seen[0]["body"] and server.seen[0]["auth"] == "Bearer sk-test"


def test_empty_answer_raises_naming_the_model(endpoint_server):
    server, api_base = endpoint_server
    server.answer = "  "
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True))
    with pytest.raises(EmptyCompletion, match=f"model 'openai/tiny' at {api_base} returned an empty answer"):
        complete(MESSAGES, seed=1, max_tokens=8)
    assert complete.usage["calls"] == 1


def test_unreachable_server_raises_after_the_retries():
    api_base = f"http://127.0.0.1:{free_port()}/v1"
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True), retries=2, timeout=5)
    with pytest.raises(ModelUnreachable, match=f"model 'openai/tiny' at {api_base} did not answer after 2 attempt"):
        complete(MESSAGES, seed=1, max_tokens=8)
    assert complete.usage == {"input_tokens": 0, "output_tokens": 0, "calls": 0}


def test_retries_below_one_are_refused():
    with pytest.raises(ValueError, match="retries must be at least 1, got 0"):
        litellm_complete(ModelEndpoint("openai/tiny", api_base="http://127.0.0.1:1/v1", local=True), retries=0)


def test_request_timeout_is_the_base_plus_the_budget_at_the_slowest_rate():
    assert request_timeout(1024, 120.0, 4.0) == 376.0
    assert request_timeout(96, 120.0, 4.0) == 144.0
    assert request_timeout(0, 120.0, 4.0) == 120.0
    assert request_timeout(1024, 120.0) == 120.0  # no rate: a fixed timeout


@pytest.mark.parametrize("arguments", [(10, 0, 4.0), (10, 120.0, 0), (10, 120.0, -1.0), (-1, 120.0, 4.0)])
def test_request_timeout_refuses_a_base_or_rate_not_above_zero_and_a_negative_budget(arguments):
    with pytest.raises(ValueError, match="request_timeout needs base_s > 0, min_tokens_per_s > 0 and max_tokens >= 0"):
        request_timeout(*arguments)


def test_a_rate_not_above_zero_is_refused_when_the_callable_is_made():
    with pytest.raises(ValueError, match="min_tokens_per_s > 0"):
        litellm_complete(ModelEndpoint("openai/tiny", api_base="http://127.0.0.1:1/v1", local=True),
                         min_tokens_per_s=0)


# The slow model writes 100 tokens/s, so a 100-token request takes 1 s.

def test_a_fixed_timeout_fails_a_request_whose_answer_takes_longer(slow_model):
    _, api_base = slow_model
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True), timeout=0.3, retries=1)
    with pytest.raises(ModelUnreachable, match="Timeout"):
        complete(MESSAGES, seed=1, max_tokens=100)


def test_a_scaled_timeout_waits_for_the_whole_budget(slow_model):
    server, api_base = slow_model
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True), timeout=0.3, retries=1,
                                min_tokens_per_s=20)  # 0.3 + 100 / 20 = 5.3 s
    assert complete(MESSAGES, seed=1, max_tokens=100) == "hello"
    assert server.budgets == [100]


def test_a_scaled_timeout_still_fails_a_server_slower_than_the_rate(slow_model):
    _, api_base = slow_model
    complete = litellm_complete(ModelEndpoint("openai/tiny", api_base=api_base, local=True), timeout=0.3, retries=1,
                                min_tokens_per_s=400)  # 0.3 + 100 / 400 = 0.55 s
    with pytest.raises(ModelUnreachable, match="Timeout"):
        complete(MESSAGES, seed=1, max_tokens=100)
