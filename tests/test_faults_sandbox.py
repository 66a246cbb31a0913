"""Faults around the sandbox, each tried with a real container: a stop during ``sleep infinity``,
the kernel's OOM killer during an agent's command, a model patch without its final newline, a
repository with CRLF line endings. (A SIGKILLed owner: tests/test_sandbox_conformance.py.)"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jinja2
import pytest
from docker.errors import NotFound
from minisweagent.exceptions import Submitted

from raydist.agents import AgentSettings, ViewEnvironment, load_prompts, oracle
from raydist.agents.scripted import SUBMIT_COMMAND
from raydist.cluster.workspace import install_view, read_changes
from raydist.grading.apply import apply_patch
from raydist.sandbox import Limits, Sandbox, as_provider, base_image_tag, ensure_instance_image
from raydist.views import RepoFiles, build_view, recover_patch
from raydist.views.base import IDENTITY, View
from tests.test_hostile_patches import FIXED, INFLECTION, ORIGINAL, PATCH, crlf_instance, crlf_only, to_crlf

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[1]

# A process that creates a sandbox, says its name, and runs `sleep infinity` in it.
OWNER = textwrap.dedent("""
    import sys
    from raydist.sandbox import Limits, Sandbox, base_image_tag, connect
    with connect().create(base_image_tag(), limits=Limits(memory="256m"), name="owner") as box:
        print(box.name, flush=True)
        box.exec("sleep infinity", timeout=float(sys.argv[1]))
""")


def start_owner(timeout: float = 600) -> tuple[subprocess.Popen, str]:
    """The owner process and its sandbox's name, once the sandbox runs."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(timeout)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    name = owner.stdout.readline().strip()
    assert name.startswith("raydist-owner-"), f"the owner printed {name!r}"
    return owner, name


def exists(client, name: str) -> bool:
    try:
        client.containers.get(name)
    except NotFound:
        return False
    return True


def wait_for(holds, bound: float) -> bool:
    """Polls ``holds()`` until it is true (True) or ``bound`` seconds pass (False)."""
    deadline = time.monotonic() + bound
    while not holds():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture
def remove_leftovers(client):
    """Names of containers a failing test may leave; removed after it."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            client.containers.get(name).remove(force=True, v=True)
        except NotFound:
            pass


def test_the_reaper_leaves_once_its_owner_has_no_container_and_the_next_one_starts_another(client):
    from raydist.sandbox import reaper

    with as_provider(client).create(base_image_tag(), name="idle"):
        first = reaper._reaper
    assert first is not None and first.poll() is None
    assert wait_for(lambda: first.poll() is not None, reaper.IDLE + 3 * reaper.POLL), "the reaper outlived its work"
    with as_provider(client).create(base_image_tag(), name="idle"):
        second = reaper._reaper
        assert second is not None and second is not first and second.poll() is None


# --- a stop while `sleep infinity` runs (inspect_ai #509) ----------------------------------


STOP_BOUND = 10.0  # seconds from the signal until the owner has exited and its container is gone


def test_ctrl_c_during_sleep_infinity_removes_the_container_and_ends_the_owner(client, remove_leftovers):
    owner, name = start_owner()
    remove_leftovers.append(name)
    owner.send_signal(signal.SIGINT)
    assert owner.wait(STOP_BOUND) != 0
    assert not exists(client, name), "the `with` block's exit did not remove the sandbox"


def test_sigterm_during_sleep_infinity_leaves_the_container_to_the_reaper_within_the_bound(client, remove_leftovers):
    owner, name = start_owner()
    remove_leftovers.append(name)
    owner.terminate()  # Python's default SIGTERM: dies at once, no clean-up of its own
    assert owner.wait(STOP_BOUND) == -signal.SIGTERM
    assert wait_for(lambda: not exists(client, name), STOP_BOUND), f"{name} outlived its owner by {STOP_BOUND} s"


def sleepers(box: Sandbox) -> int:
    """How many `sleep infinity` processes run in ``box`` (its keep-alive is one)."""
    return int(box.exec("pgrep -c -x -f 'sleep infinity'", timeout=30, cwd="/").output)


def test_sleep_infinity_ends_at_the_timeout_and_leaves_no_process_behind(client):
    with as_provider(client).create(base_image_tag(), limits=Limits(memory="256m"), name="sleeper") as box:
        done = box.exec("sleep infinity & setsid sleep infinity & sleep infinity", timeout=1)
        assert (done.returncode, done.timed_out) == (124, True)
        assert sleepers(box) == 1


# --- the kernel's OOM killer during an agent's command ------------------------------------


MEMORY_HOG = "python3 -c 'x = []\nwhile True: x.append(b\"x\" * 10**7)'"  # 10 MB pages it touches, forever


def test_an_oom_killed_command_is_named_in_the_observation_and_the_agent_goes_on(client):
    view = View(instance_id="oom-1", level="L0", seed=0, problem_statement="use less memory", files={},
                translator=IDENTITY, renderers=(), identity=None)
    prompts = load_prompts("conf/prompts")
    with as_provider(client).create(base_image_tag(), limits=Limits(memory="256m"), name="oom") as box:
        env = ViewEnvironment(box, view, timeout=60, cwd="/")
        killed = env.execute({"command": MEMORY_HOG})
        assert (killed["returncode"], env.steps[0]["timed_out"]) == (137, False)
        assert killed["exception_info"] == ("the command was killed by the kernel: it ran out of memory "
                                            "(the sandbox's limit of 256m); the sandbox is still running")
        observation = jinja2.Template(prompts.observation).render(output=killed)
        assert observation.startswith(f"<error>{killed['exception_info']}</error>\n<returncode>137</returncode>")
        after = env.execute({"command": "echo still here"})
        assert (after["output"], after["returncode"], after["exception_info"]) == ("still here\n", 0, "")
        with pytest.raises(Submitted):
            env.execute({"command": SUBMIT_COMMAND})


# --- a model patch without its final newline (mini-swe-agent#305) --------------------------


def test_a_model_patch_without_its_final_newline_applies_in_the_grading_sandbox_like_the_whole_one(client):
    with as_provider(client).create(base_image_tag(), limits=Limits(memory="256m"), name="eol") as box:
        box.write_files(ORIGINAL)
        box.exec("git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm base", timeout=60)
        for patch in (PATCH, PATCH.rstrip("\n")):
            result = apply_patch(box, patch, label="model")
            assert (result.applied, result.method) == (True, "git-apply")
            assert box.read_files(["calc.py"]) == {"calc.py": FIXED.encode()}
            box.exec("git checkout -- .", timeout=60)


# --- a repository with CRLF line endings, through the sandbox (SWE-bench#372) ---------------

CACHE = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
TO_CRLF = "find . -name '*.py' -not -path './.git/*' -exec sed -i 's/$/\\r/' {} +"
COMMIT = ("{ [ -d .git ] || git init -q; } && git add -A && "
          "git -c user.name=t -c user.email=t@t commit -qm crlf --allow-empty --no-verify")


def test_the_oracle_on_a_crlf_repository_through_the_sandbox_keeps_its_bytes_and_resolves(client, tmp_path):
    """The view installed and the oracle's files written by the sandbox, the agent's tree read
    back through the archive API, the patch recovered, then applied by the grading's
    ``apply_patch`` to a fresh CRLF copy of the instance, whose FAIL_TO_PASS test passes."""
    image = ensure_instance_image(client, INFLECTION.recipe, cache_dir=CACHE, label=INFLECTION.instance_id)
    crlf = tmp_path / "crlf"
    shutil.copytree(image.repo_dir, crlf)
    to_crlf(crlf)
    repo, instance = RepoFiles(crlf), crlf_instance(INFLECTION)
    view = build_view(instance, repo, "L2+L3", 0)
    with as_provider(client).create(image.tag, limits=Limits(memory="1g"), name="crlf-agent") as box:
        assert box.exec(TO_CRLF, timeout=60).returncode == 0
        initial = install_view(box, view)
        outcome = oracle(view=view, sandbox=box, instance=instance, read_original=repo.read,
                         settings=AgentSettings(command_timeout_s=30.0))
        assert outcome.exit_status == "Submitted"
        changes = read_changes(box, initial, repo)
    assert sorted(changes.final) == ["inflection/__init__.py"]
    patch = recover_patch({p: repo.read(p) for p in changes.final}, changes.final)
    with as_provider(client).create(image.tag, limits=Limits(memory="1g"), name="crlf-grade") as grader:
        assert grader.exec(f"{TO_CRLF} && {COMMIT}", timeout=120).returncode == 0
        applied = apply_patch(grader, patch, label="model")
        assert (applied.applied, applied.method) == (True, "git-apply"), applied.output
        assert apply_patch(grader, instance.test_patch, label="test", fallbacks=False).applied
        tree = grader.read_files(["setup.py", "inflection/__init__.py", "test_inflection.py"])
        run = grader.exec("python -m pytest -q -p no:cacheprovider -o addopts= " + " ".join(INFLECTION.FAIL_TO_PASS),
                          timeout=300)
    assert tree["setup.py"] == (crlf / "setup.py").read_bytes()
    assert crlf_only(tree["inflection/__init__.py"] or b"") and crlf_only(tree["test_inflection.py"] or b"")
    assert run.output.strip().splitlines()[-1].startswith("1 passed in "), run.output[-2000:]
