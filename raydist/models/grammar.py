"""A GBNF grammar for the agent's action format, so a small model cannot answer off-format.

The format is mini-swe-agent's text-based one, reduced to what a tiny model can keep to:

    THOUGHT: <one line>

    ```mswea_bash_command
    <one line of bash>
    ```

and nothing after the closing fence, so generation ends there. `ACTION_REGEX` parses it (it is
mini-swe-agent's default `action_regex`); the prompts under `conf/prompts/` show it.
"""

from __future__ import annotations

FENCE = "mswea_bash_command"
ACTION_REGEX = r"```" + FENCE + r"\s*\n(.*?)\n```"

GRAMMAR_FIELDS = {"llama_cpp": "grammar", "vllm": "guided_grammar"}
"""Request-body field carrying a GBNF grammar, by server kind."""


def action_grammar(*, max_thought_chars: int = 200, max_command_chars: int = 200) -> str:
    """GBNF for one THOUGHT line and exactly one fenced one-line bash command.

    Backticks are excluded from both lines so no second fence can open; the command starts
    with a non-blank character so it is never empty.

    Args:
        max_thought_chars: longest thought line, in characters (>= 1).
        max_command_chars: longest command, in characters (>= 1).

    Returns:
        The grammar text (root rule `root`).

    Raises:
        ValueError: a bound is below 1.
    """
    for name, value in (("max_thought_chars", max_thought_chars), ("max_command_chars", max_command_chars)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return (
        f'root ::= "THOUGHT: " thought "\\n\\n```{FENCE}\\n" command "\\n```"\n'
        f"thought ::= [^\\n`] [^\\n`]{{0,{max_thought_chars - 1}}}\n"
        f"command ::= [^\\n` \\t] [^\\n`]{{0,{max_command_chars - 1}}}\n"
    )


def grammar_extra_body(server: str, grammar: str | None) -> dict:
    """The request-body fields that constrain generation on `server`.

    Args:
        server: "llama_cpp" (field `grammar`) or "vllm" (field `guided_grammar`).
        grammar: GBNF text, or None to send no constraint.

    Returns:
        `{field: grammar}`, or `{}` when `grammar` is None.

    Raises:
        ValueError: unknown `server`; the message lists the known ones.
    """
    if server not in GRAMMAR_FIELDS:
        raise ValueError(f"unknown grammar server {server!r}; use one of {sorted(GRAMMAR_FIELDS)}")
    return {} if grammar is None else {GRAMMAR_FIELDS[server]: grammar}
