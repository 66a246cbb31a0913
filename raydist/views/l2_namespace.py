"""Level 2: namespace mapping (SchrodingerRepo §III-C).

The agent sees the repository's own paths, modules and symbols under a seeded virtual
namespace while the physical repository keeps its names: the view writes no file
(``files`` stays empty), and the translator carries everything across — commands to
original names, observations and file contents to virtual ones. The problem statement is
shown translated, and ``render_file`` presents a file's text in virtual names, so a
scripted agent that writes ``translator.to_original(render_file(p, t))`` writes ``t``.

``namespace_mapping(repo, identity, seed)`` is the whole mapping for one repository:
names from ``l2_names.extract_names``, virtual words from ``l2_mapping.build_mapping``.
"""

from __future__ import annotations

from dataclasses import replace

from raydist.views.base import Prepared, IDENTITY, FileRenderer, RepoFiles, View, ViewOptions, register_level
from raydist.views.l2_mapping import NameMapping, build_mapping
from raydist.views.l2_names import extract_names
from raydist.views.translator import NamespaceTranslator


def repository_identity(instance: object) -> str:
    """What the mapping is seeded by besides the seed: the instance's ``repo`` (``owner/name``),
    else its ``instance_id``, so every task of one repository shares a namespace per seed."""
    return getattr(instance, "repo", None) or instance.instance_id


def namespace_mapping(repo: RepoFiles, identity: str, seed: int) -> NameMapping:
    """The L2 bijection of ``repo``'s internal identifiers for ``(identity, seed)``.

    Raises ValueError when a ``.py`` file is not UTF-8 or the mapping is not a bijection.
    """
    names = extract_names(repo)
    return build_mapping(names.internal, names.tokens, identity, seed)


@register_level("L2", order=40)
def namespace_level(view: View, instance: object, repo: RepoFiles, seed: int, options: ViewOptions, prepared: Prepared) -> View:
    """Apply L2 to ``view``: translate the statement, install the translator (§III-C, §III-F).

    Records ``meta["l2_names"]`` (number of remapped identifiers) and ``meta["l2_subwords"]``.
    Raises ValueError when an earlier level already installed a non-identity translator.
    """
    if view.translator is not IDENTITY:
        raise ValueError(f"L2: view already has translator {view.translator!r}; apply L2 once, first")
    mapping = namespace_mapping(repo, repository_identity(instance), seed)
    translator = NamespaceTranslator(mapping)
    meta = {**view.meta, "l2_names": len(mapping.forward), "l2_subwords": len(mapping.subwords)}
    rendered = view.with_file_renderer(_renderer(translator))
    return replace(rendered, problem_statement=translator.to_view(view.problem_statement),
                   translator=translator, meta=meta)


def _renderer(translator: NamespaceTranslator) -> FileRenderer:
    def render(path: str, text: str) -> str:
        return translator.to_view(text)

    return render
