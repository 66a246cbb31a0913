"""SchrodingerRepo repository views: build a view of a task, recover patches from it.

Public API::

    build_view(instance, repo, level, seed, options, prepared) -> View
    recover_patch(original, final) -> str
    apply_patch_to_texts(files, patch) -> dict

Layout: ``base`` (View, ViewOptions, Prepared, RepoFiles), ``levels`` (the registry of levels
and ``build_view``), one subpackage per level (``l0``, ``l1/`` ... ``l4/``), and what the
levels share: ``vocabulary`` (words never a repository's own), ``audit`` (what the agent was
shown of the original), ``recover`` (patches back in original coordinates).
"""

from raydist.views.audit import ExposureLog, IdentitySet, find_exposures, identity_tokens
from raydist.views.base import (
    IDENTITY,
    TIMING_OPTIONS,
    FileRenderer,
    MissingPreparation,
    Prepared,
    RepoFiles,
    Translator,
    View,
    ViewOptions,
)
from raydist.views.l2.translator import NamespaceTranslator
from raydist.views.l3.reorder import file_seed, reorder_file, reorder_source
from raydist.views.levels import (
    ALIASES,
    LEVELS,
    Level,
    build_view,
    implemented_levels,
    known_levels,
    level_specs,
    levels_needing,
    parse_level,
    register_level,
)
from raydist.views.recover import PatchApplyError, apply_patch_to_texts, patched_paths, recover_patch

__all__ = [
    "ALIASES",
    "ExposureLog",
    "IDENTITY",
    "IdentitySet",
    "LEVELS",
    "Level",
    "NamespaceTranslator",
    "TIMING_OPTIONS",
    "FileRenderer",
    "MissingPreparation",
    "Prepared",
    "PatchApplyError",
    "RepoFiles",
    "Translator",
    "View",
    "ViewOptions",
    "apply_patch_to_texts",
    "build_view",
    "file_seed",
    "find_exposures",
    "identity_tokens",
    "implemented_levels",
    "known_levels",
    "level_specs",
    "levels_needing",
    "parse_level",
    "patched_paths",
    "recover_patch",
    "register_level",
    "reorder_file",
    "reorder_source",
]
