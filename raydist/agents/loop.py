"""One LLM agent run: mini-swe-agent's DefaultAgent, the endpoint's model, the view's sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raydist.agents.environment import ViewEnvironment
from raydist.agents.model import EndpointModel
from raydist.agents.outcome import AgentOutcome, RecordingAgent
from raydist.agents.settings import AgentSettings, Prompts, load_prompts
from raydist.models.endpoint import ModelEndpoint
from raydist.models.grammar import ACTION_REGEX, action_grammar, grammar_extra_body
from raydist.models.pricing import price_per_token, register_local_model
from raydist.models.retry import ModelUnreachable, is_model_refusal

if TYPE_CHECKING:
    from raydist.sandbox import Sandbox
    from raydist.views import View


def build_model(endpoint: ModelEndpoint, settings: AgentSettings, prompts: Prompts) -> EndpointModel:
    """The text-based model for `endpoint` with `prompts`, the decoding settings and (for local
    servers, when `settings.grammar`) the action grammar."""
    kwargs = endpoint.request_kwargs() | {
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "timeout": settings.request_timeout_s,
        "max_retries": 0,  # retries are EndpointModel's, bounded by settings.model_retries
        "drop_params": True,
    }
    if settings.grammar and endpoint.local:
        body = dict(kwargs.get("extra_body", {}))
        body |= grammar_extra_body(endpoint.grammar_server, action_grammar())
        kwargs["extra_body"] = body
    return EndpointModel(
        endpoint,
        retries=settings.model_retries,
        model_kwargs=kwargs,
        action_regex=ACTION_REGEX,
        observation_template=prompts.observation,
        format_error_template=prompts.format_error,
    )


def run_agent(*, view: View, sandbox: Sandbox, endpoint: ModelEndpoint, settings: AgentSettings, trajectory_path,
              task: str = "patch") -> AgentOutcome:
    """Let the model solve `view.problem_statement` in `sandbox`, through `view.translator`.

    Args:
        view: a `raydist.views.View` whose files are already in the sandbox.
        sandbox: a running `raydist.sandbox.Sandbox`.
        endpoint: where the model is reached.
        settings: limits, decoding settings and prompt folder.
        trajectory_path: where the trajectory JSON (mini-swe-agent format) is saved after each
            step; None keeps it in memory only.
        task: "patch" (resolve the issue; `instance.j2`) or "qa" (answer the question and submit
            the answer; `qa_instance.j2`), SchrodingerRepo RQ3.

    Returns:
        AgentOutcome with one step record per executed command (category, tokens of the call
        on its first command, exposure audit of the observation shown, memorised names) and the
        exposure audit of the statement (§III-F). `exit_status` is mini-swe-agent's (`Submitted`,
        `LimitsExceeded`, `TimeExceeded`, `RepeatedFormatError`), `ModelUnreachable` (the model
        stayed unreachable: an infrastructure failure) or `ModelError` (a non-transient refusal
        of the model, `raydist.models.retry.NON_TRANSIENT_ERRORS`, e.g. context window exceeded:
        the run's end, never retried); `raydist.outcomes.agent_exit_of` maps it. `error` holds
        the failure's message for the last two.

    Raises:
        Exception: any other failure inside the loop (Docker, raydist itself), after the
            trajectory is saved: `raydist.outcomes.classify_exception` tells which.
        FileNotFoundError: a prompt template is missing.
        UnknownPrice: a hosted model has no known price, so the cost limit could not hold.
    """
    if endpoint.local:
        register_local_model(endpoint.litellm_model)
    elif settings.cost_limit > 0:
        price_per_token(endpoint.litellm_model)
    prompts = load_prompts(settings.prompts_dir, task=task)
    model = build_model(endpoint, settings, prompts)
    env = ViewEnvironment(sandbox, view, timeout=settings.command_timeout_s, cwd=settings.cwd,
                          output_limit_chars=settings.output_limit_chars)
    agent = RecordingAgent(
        model, env, output_path=trajectory_path,
        system_template=prompts.system, instance_template=prompts.instance,
        step_limit=settings.step_limit, cost_limit=settings.cost_limit,
        wall_time_limit_seconds=int(settings.wall_time_limit_s),
    )
    error, submission = None, ""
    try:
        result = agent.run(task=view.problem_statement)
        exit_status = result.get("exit_status", "")
        submission = result.get("submission", "") if exit_status == "Submitted" else ""
    except ModelUnreachable as exc:  # infrastructure: the unit records it and runs again (bounded)
        exit_status, error = type(exc).__name__, str(exc)
    except Exception as exc:
        if not is_model_refusal(exc):
            raise  # Docker or raydist itself: execute_unit classifies it (raydist.outcomes)
        # The model's own answer to this request (400, context too long, content policy):
        # asking again gets the same answer, so the run ends here as the model's outcome.
        exit_status, error = "ModelError", f"{type(exc).__name__}: {exc}"
    trajectory = agent.save(agent.config.output_path)
    return AgentOutcome(
        exit_status=exit_status, steps=agent.n_calls, input_tokens=model.input_tokens,
        output_tokens=model.output_tokens, cost=agent.cost, trajectory=trajectory, error=error,
        step_records=tuple(env.steps), statement_leaks=len(env.exposure.statement),
        statement_names=tuple(env.exposure.statement), submission=submission,
    )
