"""`litellm_complete` through real litellm against a minimal OpenAI-compatible HTTP endpoint on
loopback that records each request body and answers with a fixed message, and against a port
where nothing listens."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raydist.models import EmptyCompletion, ModelEndpoint, ModelUnreachable, litellm_complete
from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
from raydist.models.server import free_port

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
