"""SchrodingerRepo repository views: build a view of a task, recover patches from it.

Public API::

    build_view(instance, repo, level, seed, options) -> View
    recover_patch(original, final) -> str
    apply_patch_to_texts(files, patch) -> dict
"""

from raydist.views import l0, l3_reorder  # noqa: F401  (register the levels)
from raydist.views.base import (
    IDENTITY,
    FileRenderer,
    RepoFiles,
    Translator,
    View,
    ViewOptions,
    build_view,
    known_levels,
    register_level,
)
from raydist.views.l3_reorder import file_seed, reorder_file, reorder_source
from raydist.views.recover import PatchApplyError, apply_patch_to_texts, patched_paths, recover_patch

__all__ = [
    "IDENTITY",
    "FileRenderer",
    "PatchApplyError",
    "RepoFiles",
    "Translator",
    "View",
    "ViewOptions",
    "apply_patch_to_texts",
    "build_view",
    "file_seed",
    "known_levels",
    "patched_paths",
    "recover_patch",
    "register_level",
    "reorder_file",
    "reorder_source",
]
