"""Shared fixtures: the real Docker daemon with raydist's base image.

Outside CI a missing daemon or base image skips the tests that need them, saying how to get
them; in CI (CI=true) it fails them, because there `launch/setup.sh` must have provided both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a local Ray binds 127.0.0.1

import pytest  # noqa: E402

from raydist.sandbox import SandboxUnavailable, base_image_tag, connect  # noqa: E402


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI must provide it: launch/setup.sh starts the daemon and builds the image)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def client():
    """A docker SDK client of the running daemon whose base image exists."""
    try:
        docker_client = connect()
    except SandboxUnavailable as exc:
        _unavailable(str(exc))
    tag = base_image_tag()
    if not docker_client.images.list(name=tag):
        _unavailable(f"base image {tag} is absent; build it with `bash launch/setup.sh`")
    return docker_client


SDIST_CACHE = Path(tempfile.gettempdir()) / "raydist-test-sdists"


@pytest.fixture(scope="session")
def toolz_src(tmp_path_factory) -> Path:
    """A pristine unpack of the real toolz 1.0.0 sdist (downloaded once from PyPI, cached);
    tests that change files work on a copy."""
    archive = SDIST_CACHE / "toolz-1.0.0.tar.gz"
    if not archive.exists():
        SDIST_CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "toolz==1.0.0",
               "-d", str(SDIST_CACHE)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0 or not archive.exists():
            pytest.skip(f"cannot download the toolz 1.0.0 sdist from PyPI: {done.stderr.strip()[-300:]}")
    root = tmp_path_factory.mktemp("toolz")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root / "toolz-1.0.0"


@pytest.fixture
def ray_local():
    """A local Ray on loopback with two CPUs and two ``sandbox`` slots, as ``init_ray`` starts
    one; started on first use, reused while initialised (a test that builds its own cluster
    shuts it down, and the next user starts another), ended by Ray at exit."""
    import ray

    from raydist.cluster.runner import RayOptions

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, resources={RayOptions().sandbox_resource: 2}, include_dashboard=False,
                 log_to_driver=False)
    yield


GEMMA = "gemma3-270m"


@pytest.fixture(scope="session")
def gemma_entry() -> dict:
    """The shipped ``local_models.gemma3-270m`` entry (``raydist/conf/local_models.yaml``), as
    a launch reads it: tests start the embedded model exactly as production does."""
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parent.parent / "raydist" / "conf" / "local_models.yaml"
    return OmegaConf.to_container(OmegaConf.load(conf).local_models[GEMMA], resolve=True)


#: The running embedded server: ``(driver node id, actor, api_base)``; see ``llama``.
_LLAMA: list = []


@pytest.fixture
def llama(ray_local, gemma_entry):
    """``(actor, api_base)`` of the embedded Gemma model's llama.cpp server (``openai/gemma3-270m``
    for litellm), under a ModelServer Ray actor started with the production command and
    arguments (``raydist.cluster.serving``). One server per local Ray: started on first use,
    started again when a test that built its own cluster ended the Ray it lived in (the
    driver's node id tells), stopped with that Ray at exit."""
    import ray

    from raydist.cluster.serving import server_arguments, server_command
    from raydist.models.server import ModelServer

    node = ray.get_runtime_context().get_node_id()
    if not _LLAMA or _LLAMA[0] != node:
        actor = ModelServer.options(num_cpus=1).remote(server_command(gemma_entry),
                                                       **server_arguments(GEMMA, gemma_entry))
        _LLAMA[:] = [node, actor, ray.get(actor.start.remote())]
    yield _LLAMA[1], _LLAMA[2]


class _SlowModel(BaseHTTPRequestHandler):
    """POST /v1/chat/completions -> ``server.answer`` after ``max_tokens / server.tokens_per_s``
    seconds, as a model that always writes its whole budget; appends each request's
    ``max_tokens`` to ``server.budgets``."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.budgets.append(body["max_tokens"])
        time.sleep(body["max_tokens"] / self.server.tokens_per_s)
        reply = json.dumps({
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": self.server.answer}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": body["max_tokens"], "total_tokens": 10},
        }).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first, as the test wanted

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_model():
    """``(server, api_base)`` of an OpenAI-compatible endpoint on loopback that generates at
    ``server.tokens_per_s`` (default 100) and answers ``server.answer`` (default "hello")."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowModel)
    server.tokens_per_s, server.answer, server.budgets = 100.0, "hello", []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
