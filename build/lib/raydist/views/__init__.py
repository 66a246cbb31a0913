"""SchrodingerRepo repository views: build a view of a task, recover patches from it.

Public API::

    build_view(instance, repo, level, seed, options, prepared) -> View
    recover_patch(original, final) -> str
    apply_patch_to_texts(files, patch) -> dict
"""

from raydist.views import l0, l1_level, l2_namespace, l3_reorder, l4_level  # noqa: F401  (register the levels)
from raydist.views.base import (
    ALIASES,
    IDENTITY,
    FileRenderer,
    MissingPreparation,
    Prepared,
    RepoFiles,
    Translator,
    View,
    ViewOptions,
    build_view,
    implemented_levels,
    known_levels,
    levels_needing,
    parse_level,
    register_level,
)
from raydist.views.l3_reorder import file_seed, reorder_file, reorder_source
from raydist.views.recover import PatchApplyError, apply_patch_to_texts, patched_paths, recover_patch

__all__ = [
    "ALIASES",
    "IDENTITY",
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
    "implemented_levels",
    "known_levels",
    "levels_needing",
    "parse_level",
    "patched_paths",
    "recover_patch",
    "register_level",
    "reorder_file",
    "reorder_source",
]
