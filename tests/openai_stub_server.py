"""A minimal OpenAI-compatible HTTP server, run as its own process by the supervisor tests:
`python tests/openai_stub_server.py HOST PORT [ANSWER]`.

GET /v1/models lists one model; POST /v1/chat/completions answers ANSWER (default a one-
command mini-swe-agent action) with fixed token counts, or, when ANSWER is `status:<code>`,
fails with that HTTP status (an alive server that does not serve); GET /calls says how many
chat requests came. It starts in a fraction of a second,
so restarts can be tested many times where llama.cpp would need seconds each.

`scripted_server(script)` runs the same API in this process with a script of replies (tests
of admission control: rate limits, usage numbers).
"""

import json
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "THOUGHT: look around.\n\n```mswea_bash_command\nls\n```"


class Handler(BaseHTTPRequestHandler):
    def _reply(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/calls":
            self._reply({"calls": self.server.calls})
        elif self.path == "/v1/models":
            self._reply({"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "me"}]})
        else:
            self.send_error(404)

    def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls += 1
        if self.server.answer.startswith("status:"):
            self.send_error(int(self.server.answer.split(":")[1]))
            return
        self._reply({
            "id": "c1", "object": "chat.completion", "created": 0, "model": request["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.server.answer}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
        })

    def log_message(self, *args):
        pass


def reply(content: str = ANSWER, prompt_tokens: int = 7, completion_tokens: int = 5) -> dict:
    """A script entry: a 200 answering ``content`` with these usage numbers."""
    return {"status": 200, "content": content, "usage": (prompt_tokens, completion_tokens)}


def refuse(status: int = 429, retry_after: float | None = None) -> dict:
    """A script entry: an error ``status`` (429, 503...), with ``Retry-After`` when given."""
    return {"status": status, "retry_after": retry_after}


class Scripted(Handler):
    """POST /v1/chat/completions -> the next entry of ``server.script`` (``reply``/``refuse``;
    the last one repeats); ``server.log`` gets ``(monotonic time, status, in flight)`` of
    each request as it arrives, ``server.prompts`` its messages' text, ``server.peak`` the most
    requests in flight at once."""

    def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            entry = server.script[min(server.calls, len(server.script) - 1)]
            server.calls += 1
            server.in_flight += 1
            server.peak = max(server.peak, server.in_flight)
            server.log.append((time.monotonic(), entry["status"], server.in_flight))
            server.prompts.append("\n".join(str(m.get("content")) for m in request["messages"]))
        try:
            time.sleep(server.delay_s)
            if entry["status"] != 200:
                body = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode()
                self.send_response(entry["status"])
                if entry.get("retry_after") is not None:
                    self.send_header("Retry-After", f"{entry['retry_after']:g}")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            prompt, completion = entry["usage"]
            self._reply({
                "id": "c1", "object": "chat.completion", "created": 0, "model": request["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": entry["content"]}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            })
        finally:
            with server.lock:
                server.in_flight -= 1


@contextmanager
def scripted_server(script: list[dict], delay_s: float = 0.0):
    """``(server, api_base)`` of a ``Scripted`` server on loopback, answering each request after
    ``delay_s`` seconds; ``server.script`` may be replaced while it runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.script, server.delay_s, server.calls, server.in_flight, server.peak = list(script), delay_s, 0, 0, 0
    server.log, server.prompts, server.lock = [], [], threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    server = ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
    server.answer = sys.argv[3] if len(sys.argv) > 3 else ANSWER
    server.calls = 0
    print(f"stub listening on {sys.argv[1]}:{sys.argv[2]}", flush=True)
    server.serve_forever()
