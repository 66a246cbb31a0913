"""Scripted agents that validate the pipeline around the model: `oracle` writes the gold patch
through the view and submits (every instance should resolve), `null` submits without editing
(none should). Both run in mini-swe-agent's DefaultAgent with a fixed list of commands in
place of a model, so their trajectories have the same format as an LLM agent's."""

from __future__ import annotations

import base64
import secrets
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minisweagent.models.utils.actions_text import format_observation_messages

from raydist.agents.environment import SUBMIT_MARKER, ViewEnvironment
from raydist.agents.outcome import AgentOutcome, RecordingAgent
from raydist.agents.settings import AgentSettings, load_prompts
from raydist.grading.apply import apply_patch
from raydist.views import PatchApplyError
from raydist.views.recover import patched_paths

if TYPE_CHECKING:
    from raydist.sandbox import Sandbox
    from raydist.tasks import Instance
    from raydist.views import View

SUBMIT_COMMAND = f"echo {SUBMIT_MARKER}"
# One bash argument may hold at most 128 KiB (Linux MAX_ARG_STRLEN), so large files are
# written in several appending commands.
_B64_CHUNK = 96 * 1024


class ScriptedModel:
    """mini-swe-agent's Model protocol playing back `commands`, one per query, at no cost."""

    def __init__(self, name: str, commands: list[str], observation_template: str):
        self.config = {"name": name, "commands": len(commands)}
        self._commands = list(commands)
        self._observation_template = observation_template

    def query(self, messages: list[dict], **kwargs) -> dict:
        """The next scripted command as an assistant message (IndexError when exhausted)."""
        command = self._commands.pop(0)
        content = f"THOUGHT: scripted step.\n\n```mswea_bash_command\n{command}\n```"
        extra = {"actions": [{"command": command}], "cost": 0.0, "input_tokens": 0, "output_tokens": 0,
                 "timestamp": time.time()}
        return {"role": "assistant", "content": content, "extra": extra}

    def format_message(self, **kwargs) -> dict:
        """The message as given (role, content, extra)."""
        return dict(kwargs)

    def format_observation_messages(self, message: dict, outputs: list[dict],
                                    template_vars: dict | None = None) -> list[dict]:
        """Observations rendered as for the text-based LLM model."""
        return format_observation_messages(outputs, observation_template=self._observation_template,
                                           template_vars=template_vars)

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        """The scripted model's config."""
        return dict(self.config) | kwargs

    def serialize(self) -> dict:
        """Config and type, in mini-swe-agent's layout."""
        return {"info": {"config": {"model": dict(self.config),
                                    "model_type": f"{self.__class__.__module__}.{self.__class__.__name__}"},
                         "model_stats": {"input_tokens": 0, "output_tokens": 0}}}


def write_file_commands(path: str, text: str | None) -> list[str]:
    """Bash commands that make `path` (relative to the working directory) hold exactly `text`
    (UTF-8), or delete it when `text` is None. Content travels base64-encoded so any byte
    survives the shell."""
    quoted = shlex.quote(path)
    if text is None:
        return [f"rm -f -- {quoted}"]
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    chunks = [data[i : i + _B64_CHUNK] for i in range(0, len(data), _B64_CHUNK)] or [""]
    commands = [f"mkdir -p -- \"$(dirname -- {quoted})\" && printf %s {shlex.quote(chunks[0])} | base64 -d > {quoted}"]
    commands += [f"printf %s {shlex.quote(chunk)} | base64 -d >> {quoted}" for chunk in chunks[1:]]
    return commands


def oracle(*, view: View, sandbox: Sandbox, instance: Instance, read_original: Callable[[str], str | None],
           settings: AgentSettings, trajectory_path=None,
           on_gold_applied: Callable[[str], None] | None = None) -> AgentOutcome:
    """Apply `instance.patch` (the gold patch) through the view, then submit.

    For each file the patch touches, the patched original is computed in original coordinates,
    rendered as the view would show it (`view.render_file`), and written by a bash command at
    the path the agent sees (`view.translator.to_view`), which the environment maps back.

    Args:
        view: the run's `raydist.views.View`, already installed in `sandbox`.
        sandbox: a running `raydist.sandbox.Sandbox`.
        instance: has `patch` (unified diff in original coordinates).
        read_original: original text of a relative path, None when absent (e.g. `RepoFiles.read`).
        settings: `command_timeout_s`, `output_limit_chars`, `prompts_dir`, `cwd` are used.
        trajectory_path: where the trajectory JSON is written (None: not written).
        on_gold_applied: called with the method that applied the gold patch (``git-apply``,
            ``git-apply-3way``, ``git-apply-reject``, ``patch-fuzz``), for the row.

    Raises:
        raydist.views.PatchApplyError: the gold patch does not apply to the originals with any
            of SWE-bench's methods (``git apply``, ``--3way``, ``--reject``, ``patch --fuzz=5``).
    """
    paths = patched_paths(instance.patch)
    patched, method = gold_texts(sandbox, instance.patch, {p: read_original(p) for p in paths})
    if on_gold_applied is not None:
        on_gold_applied(method)
    commands = []
    for path in paths:
        text = patched[path]
        rendered = None if text is None else view.render_file(path, text)
        # base64 hides the content from the environment's command translation, so the bytes
        # written are translated here: the physical repository keeps original names (§III-C).
        content = None if rendered is None else view.translator.to_original(rendered)
        commands += write_file_commands(view.translator.to_view(path), content)
    return _run_script("oracle", [*commands, SUBMIT_COMMAND], view=view, sandbox=sandbox,
                       settings=settings, trajectory_path=trajectory_path)


def gold_texts(sandbox: Sandbox, patch: str, originals: dict[str, str | None]) -> tuple[dict[str, str | None], str]:
    """``(texts, method)``: the files ``patch`` touches after applying it to ``originals`` (path -> text, None: no
    such file) as SWE-bench applies a patch (``raydist.grading.apply_patch``: git apply, then
    its fallbacks up to ``patch --fuzz=5``), in a scratch git repository under ``/tmp`` of
    ``sandbox`` holding only those files; removed afterwards. Raises ``PatchApplyError`` with
    the tools' output when no method applies it."""
    scratch = f"/tmp/raydist-gold-{secrets.token_hex(8)}"
    sandbox.exec(f"mkdir -p {scratch}", timeout=60, cwd="/")
    try:
        # Written by commands, not put_archive, so the files belong to the container's user.
        for path, text in originals.items():
            if text is not None:
                for command in write_file_commands(path, text):
                    done = sandbox.exec(command, timeout=120, cwd=scratch)
                    if done.returncode != 0:
                        raise RuntimeError(f"could not write {path} in {scratch}: {done.output[-2000:]}")
        init = sandbox.exec("git init -q && git add -A && git -c user.name=raydist -c user.email=raydist@localhost "
                            "commit -qm base --allow-empty --no-verify", timeout=120, cwd=scratch)
        if init.returncode != 0:
            raise RuntimeError(f"could not prepare the gold patch's files in {scratch}: {init.output[-2000:]}")
        applied = apply_patch(sandbox, patch, label="gold", cwd=scratch)
        if not applied.applied:
            raise PatchApplyError(applied.output[-2000:])
        data = sandbox.read_files(list(originals), root=scratch)
        return {p: None if b is None else b.decode("utf-8") for p, b in data.items()}, applied.method
    finally:
        sandbox.exec(f"rm -rf {scratch}", timeout=60, cwd="/")


def answer(*, view: View, sandbox: Sandbox, text: str, settings: AgentSettings, trajectory_path=None) -> AgentOutcome:
    """Submit ``text`` (an answer in view names) as a repository question's answer: the oracle of
    a SWE-QA view, whose reference answer ``raydist.cluster.kinds.QuestionKind`` hands in through
    ``view.translator.to_view``. The command prints it from base64, so it reaches the submission
    as the agent's output would: through the sandbox and the translator's ``to_view``."""
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    command = f"{SUBMIT_COMMAND} && echo {encoded} | base64 -d"
    return _run_script("oracle", [command], view=view, sandbox=sandbox, settings=settings,
                       trajectory_path=trajectory_path, task="qa")


def null(*, view: View, sandbox: Sandbox, settings: AgentSettings, trajectory_path=None) -> AgentOutcome:
    """Submit at once without editing anything (the floor every real agent should beat)."""
    return _run_script("null", [SUBMIT_COMMAND], view=view, sandbox=sandbox, settings=settings,
                       trajectory_path=trajectory_path)


def _run_script(name: str, commands: list[str], *, view: View, sandbox: Sandbox, settings: AgentSettings,
                trajectory_path, task: str = "patch") -> AgentOutcome:
    prompts = load_prompts(settings.prompts_dir, task=task)
    env = ViewEnvironment(sandbox, view, timeout=settings.command_timeout_s, cwd=settings.cwd,
                          output_limit_chars=settings.output_limit_chars)
    model = ScriptedModel(name, commands, prompts.observation)
    # No step, cost or time limit: the script is finite and each command has its timeout.
    agent = RecordingAgent(model, env, system_template=prompts.system, instance_template=prompts.instance,
                           step_limit=0, cost_limit=0, output_path=trajectory_path)
    error, submission = None, ""
    try:
        result = agent.run(task=view.problem_statement)
        exit_status = result.get("exit_status", "")
        submission = result.get("submission", "") if exit_status == "Submitted" else ""
    except Exception as exc:  # noqa: BLE001 - recorded as the outcome, like the LLM agent's failures
        exit_status, error = type(exc).__name__, str(exc)
    failed = [s for s in env.steps if s["returncode"] != 0]
    if error is None and failed:
        error = f"the {name} script's command {failed[0]['step']} failed (returncode {failed[0]['returncode']})"
    if error is None and exit_status != "Submitted":
        error = f"the {name} script ended without submitting ({exit_status})"
    trajectory = agent.save(agent.config.output_path)
    return AgentOutcome(exit_status=exit_status, steps=agent.n_calls, input_tokens=0, output_tokens=0,
                        cost=0.0, trajectory=trajectory, error=error, step_records=tuple(env.steps),
                        statement_leaks=len(env.exposure.statement), submission=submission)
