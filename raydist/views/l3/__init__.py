"""Level 3: intra-file layout reordering (SchrodingerRepo §III-D).

``deps`` builds each run's definition-time dependency graph, ``pins`` keeps in order what
may register itself, ``sample`` draws a uniform topological order, and
``reorder.reorder_level`` applies it to the target files.
"""

from raydist.views.l3.reorder import (
    definition_graphs,
    file_seed,
    pinned_definitions,
    reorder_file,
    reorder_level,
    reorder_source,
)
from raydist.views.l3.sample import count_linear_extensions, is_linear_extension, sample_linear_extension

__all__ = ["count_linear_extensions", "definition_graphs", "file_seed", "is_linear_extension", "pinned_definitions",
           "reorder_file", "reorder_level", "reorder_source", "sample_linear_extension"]
