"""A minimal OpenAI-compatible HTTP server, run as its own process by the supervisor tests:
`python tests/openai_stub_server.py HOST PORT [ANSWER]`.

GET /v1/models lists one model; POST /v1/chat/completions answers ANSWER (default a one-
command mini-swe-agent action) with fixed token counts, or, when ANSWER is `status:<code>`,
fails with that HTTP status (an alive server that does not serve); GET /calls says how many
chat requests came. It starts in a fraction of a second,
so restarts can be tested many times where llama.cpp would need seconds each.
"""

import json
import sys
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


if __name__ == "__main__":
    server = ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
    server.answer = sys.argv[3] if len(sys.argv) > 3 else ANSWER
    server.calls = 0
    print(f"stub listening on {sys.argv[1]}:{sys.argv[2]}", flush=True)
    server.serve_forever()
