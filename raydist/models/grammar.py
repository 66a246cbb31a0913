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

GRAMMAR_FIELDS = {"llama_cpp": ("grammar",), "vllm": ("structured_outputs", "grammar"), "none": None}
"""Request-body field carrying a GBNF grammar, by server kind, as a path of keys: llama.cpp's
top-level ``grammar``; vLLM's ``structured_outputs.grammar`` (its ``guided_grammar`` was removed
in vLLM 0.12, docs.vllm.ai "Structured Outputs")."""


def action_grammar(*, max_thought_chars: int = 200, max_command_chars: int = 200) -> str:
    """GBNF for one THOUGHT line and exactly one fenced one-line bash command that parses.

    The command is up to four simple commands joined by ``&&``, ``||``, ``|`` or ``;``, each a
    command word, up to eight arguments and an optional ``>``/``>>`` redirection. An argument
    is a bare word of characters that are never special to bash, or a single-quoted string,
    or a double-quoted string without ``$``, backslash or backtick, so every command bash
    receives is syntactically valid (no unbalanced quotes, no command substitution) and runs.
    Backticks are excluded everywhere, so no second fence can open.

    Args:
        max_thought_chars: longest thought line, in characters (>= 1).
        max_command_chars: longest quoted argument, in characters (>= 1).

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
        'command ::= simple ( " " op " " simple ){0,3}\n'
        'op ::= "&&" | "||" | "|" | ";"\n'
        'simple ::= word ( " " arg ){0,8} ( " " redir " " bare )?\n'
        'redir ::= ">" | ">>"\n'
        "word ::= [a-zA-Z_./] [a-zA-Z0-9_./-]{0,40}\n"
        "arg ::= bare | sq | dq\n"
        "bare ::= [a-zA-Z0-9_./:=,+%@*-] [a-zA-Z0-9_./:=,+%@*-]{0,80}\n"
        f"sq ::= \"'\" [^'\\n`]{{0,{max_command_chars}}} \"'\"\n"
        f'dq ::= "\\"" [^"\\n`$\\\\]{{0,{max_command_chars}}} "\\""\n'
    )


def grammar_extra_body(server: str, grammar: str | None) -> dict:
    """The request-body fields that constrain generation on `server`.

    Args:
        server: "llama_cpp" (field `grammar`), "vllm" (`structured_outputs.grammar`) or "none"
            (a server that takes no grammar: nothing is sent).
        grammar: GBNF text, or None to send no constraint.

    Returns:
        `{"grammar": grammar}` (llama.cpp), `{"structured_outputs": {"grammar": grammar}}` (vLLM),
        or `{}` when `grammar` is None or the server takes none.

    Raises:
        ValueError: unknown `server`; the message lists the known ones.
    """
    if server not in GRAMMAR_FIELDS:
        raise ValueError(f"unknown grammar server {server!r}; use one of {sorted(GRAMMAR_FIELDS)}")
    path = GRAMMAR_FIELDS[server]
    if grammar is None or path is None:
        return {}
    body: dict = {path[-1]: grammar}
    for key in reversed(path[:-1]):
        body = {key: body}
    return body
