"""Shared fixtures: the real Docker daemon with raydist's base image, the embedded model's
server, the session's shared oracle and null launch; and how the suite is split over
pytest-xdist workers (``--dist loadgroup``, see ``pytest_collection_modifyitems``).

Outside CI a missing daemon or base image skips the tests that need them, saying how to get
them; in CI (CI=true) it fails them, because there `launch/setup.sh` must have provided both.
tests/README.md lists the shared fixtures, what each costs, and where a new test hangs on them.
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
# litellm reads its price map from the package instead of fetching it (a test file may import
# litellm before raydist.models, which sets the same)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest  # noqa: E402
from filelock import FileLock  # noqa: E402

from raydist.sandbox import SandboxUnavailable, base_image_tag, connect  # noqa: E402


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI must provide it: launch/setup.sh starts the daemon and builds the image)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def client():
    """A docker SDK client of the running daemon whose base image exists."""
    try:
        docker_client = connect().client
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
    SDIST_CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(SDIST_CACHE / "toolz.lock"):  # another worker may be downloading it
        if not archive.exists():
            _download_toolz(archive)
    root = tmp_path_factory.mktemp("toolz")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root / "toolz-1.0.0"


def _download_toolz(archive: Path) -> None:
    """Downloads the toolz 1.0.0 sdist to ``archive``; skips the test when PyPI cannot give it."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "toolz==1.0.0",
           "-d", str(SDIST_CACHE)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or not archive.exists():
        pytest.skip(f"cannot download the toolz 1.0.0 sdist from PyPI: {done.stderr.strip()[-300:]}")


@pytest.fixture
def ray_local():
    """A local Ray on loopback with two CPUs and two ``sandbox`` slots, as ``init_ray`` starts
    one; started on first use, reused while initialised (a test that builds its own cluster
    shuts it down, and the next user starts another), ended by Ray at exit."""
    import ray

    from raydist.cluster.scheduler import RayOptions

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


@pytest.fixture(scope="session")
def builtin_launch(client, tmp_path_factory):
    """The session's shared launch (``tests.launches.BuiltinLaunch``): the oracle, then the null
    agent, on every built-in instance at every level of ``+sweep=full_levels``, seeds 0 and 1,
    through ``python -m raydist.launch`` with the real Ray, Docker and embedded model. It costs
    about ten minutes once; every test that only reads a launch's rows, trajectories, steps,
    report or views reads this one. Tests must not write into its run directories."""
    from tests.launches import builtin_launch as run

    return run(tmp_path_factory.mktemp("builtin-launch"))


# --- splitting the suite over pytest-xdist workers ------------------------------------------
#
# `--dist loadgroup` (pyproject's addopts) sends every test of one xdist_group to one worker and
# spreads the ungrouped ones test by test. Each rule below keeps a costly thing made once:

#: A fixture made once per worker process, too costly to make on both: its tests share a group.
SHARED_FIXTURES = {
    "builtin_launch": "builtin-launch",  # the shared oracle and null launch (about ten minutes)
    "llama": "llama-server",  # the embedded model's server under the worker's local Ray
}
#: Tests that must not share the machine with each other (node loss with short health checks,
#: SIGKILL of a driver, `ray up` of namespaced hosts) carry this marker and run one at a time.
WHOLE_MACHINE = "whole_machine"


def _module_scoped(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module- or class-scoped fixture (made once per module, so its
    module's tests stay on one worker rather than making it on each)."""
    defs = item._fixtureinfo.name2fixturedefs  # pytest's record of the fixtures the test resolved
    return any(d.scope in ("module", "class", "package") for chain in defs.values() for d in chain)


def xdist_group_of(item: pytest.Item) -> str | None:
    """The worker group of one test, by the first rule that holds: its own ``xdist_group``
    marker, a shared fixture it uses, the whole-machine marker, a module-scoped fixture (its
    module's path); None spreads it alone."""
    if marker := item.get_closest_marker("xdist_group"):
        return marker.args[0] if marker.args else marker.kwargs.get("name", "default")
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in item.fixturenames:
            return group
    if item.get_closest_marker(WHOLE_MACHINE):
        return WHOLE_MACHINE
    if _module_scoped(item):
        return item.nodeid.split("::", 1)[0]
    return None


def _name_by_group(item: pytest.Item, group: str) -> None:
    """Appends ``@group`` to the test's id, which is how xdist's loadgroup scheduler reads a
    group. pytest-xdist 3.8 writes it to ``item._nodeid``, which pytest 9.2 no longer reads
    (a test's id is ``item._id``), so without this every group would be scattered."""
    from _pytest.nodeid import NodeId

    if not item.nodeid.endswith(f"@{group}"):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    loadgroup = getattr(config.option, "loadgroup", False)  # set on xdist's workers
    for item in items:
        group = xdist_group_of(item)
        if group is not None and loadgroup:
            _name_by_group(item, group)
