"""Prompt templates: the Jinja2 ``.j2`` files under ``raydist/conf/prompts/``, read, checked and rendered
in one place.

Each user of templates (the agent, L1, L4, DyCodeEval) keeps its own dataclass of template
texts and names the file stems it needs; ``read_templates`` reads them from a folder and fails
at load time on a missing file or a template that does not parse, so a broken prompt stops a
launch before any model is asked. ``render`` is the one way a template becomes text.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

__all__ = ["DEFAULT_PROMPTS_DIR", "PACKAGE_ROOT", "read_templates", "render", "resolve_prompts_dir"]

PACKAGE_ROOT = Path(__file__).resolve().parent
"""The installed ``raydist`` package folder, which holds ``conf/`` (the Hydra configs and
``conf/prompts/``), in a checkout and in an installed wheel alike."""
DEFAULT_PROMPTS_DIR = PACKAGE_ROOT / "conf" / "prompts"
"""The shipped templates."""


def resolve_prompts_dir(prompts_dir: str | Path) -> Path:
    """``prompts_dir`` as an absolute folder: a relative path is taken from ``PACKAGE_ROOT``, not
    from the working directory, so ``conf/prompts`` names the shipped templates wherever a
    run starts (a Ray worker's working directory is not the checkout)."""
    folder = Path(prompts_dir)
    return folder if folder.is_absolute() else PACKAGE_ROOT / folder


def read_templates(prompts_dir: str | Path, stems: Mapping[str, str], what: str) -> dict[str, str]:
    """The text of ``<stem>.j2`` for every ``{field: stem}`` of ``stems``, from ``prompts_dir``
    (see ``resolve_prompts_dir``), each checked to parse as Jinja2.

    Args:
        prompts_dir: the folder of templates.
        stems: field name -> file stem, e.g. ``{"rewrite": "l4_rewrite"}``; the result keeps its order.
        what: whose templates these are, for error messages (``"L1"``, ``"DyCodeEval"``).

    Returns:
        ``{field: template text}`` (UTF-8, unchanged).

    Raises:
        FileNotFoundError: a file is missing; the message names it, the folder (and whether the
            folder itself is missing) and every file the folder must hold.
        jinja2.TemplateSyntaxError: a template does not parse; ``str()`` gives jinja2's reason,
            the file's path and the line.
    """
    folder = resolve_prompts_dir(prompts_dir)
    texts = {}
    for field, stem in stems.items():
        path = folder / f"{stem}.j2"
        if not path.is_file():
            where = folder if folder.is_dir() else f"{folder} (no such folder)"
            expected = ", ".join(f"{s}.j2" for s in stems.values())
            raise FileNotFoundError(f"{what} prompt template {path.name} is missing from {where}; "
                                    f"the folder must hold {expected}")
        texts[field] = path.read_text(encoding="utf-8")
        try:
            _PARSER.parse(texts[field], name=path.name, filename=str(path))
        except jinja2.TemplateSyntaxError as exc:  # jinja2's own text does not say which file
            raise jinja2.TemplateSyntaxError(f"{what} prompt template {path.name} does not parse: {exc.message}",
                                             exc.lineno, path.name, str(path)) from exc
    return texts


def render(template: str, variables: Mapping[str, Any], *, trim_blocks: bool = False,
           lstrip_blocks: bool = False) -> str:
    """``template`` rendered from ``variables``, not escaped, exactly as a
    ``jinja2.Environment(undefined=StrictUndefined, trim_blocks=..., lstrip_blocks=...)`` renders it.

    Raises:
        jinja2.UndefinedError: the template uses a variable that was not given.
        jinja2.TemplateSyntaxError: the template does not parse.
    """
    return _compiled(template, trim_blocks, lstrip_blocks).render(**variables)


# Whitespace options change how text around tags is kept, never whether a template parses.
_PARSER = jinja2.Environment(undefined=jinja2.StrictUndefined)


@lru_cache(maxsize=64)
def _compiled(template: str, trim_blocks: bool, lstrip_blocks: bool) -> jinja2.Template:
    """Templates are rendered once per request; compile each text once per process."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=trim_blocks,
                                     lstrip_blocks=lstrip_blocks, autoescape=False)
    return environment.from_string(template)
