"""Level 2: namespace mapping (SchrodingerRepo §III-C, §III-F).

``names`` finds the repository's own identifiers, ``mapping`` draws their seeded virtual
names, ``translator`` rewrites commands and observations between the two, and
``namespace.namespace_level`` puts them together into a view.
"""

from raydist.views.l2.mapping import NameMapping, build_mapping
from raydist.views.l2.names import RepoNames, extract_names, is_reserved
from raydist.views.l2.namespace import namespace_level, namespace_mapping, plan_names, repository_identity
from raydist.views.l2.translator import NamespaceTranslator

__all__ = ["NameMapping", "NamespaceTranslator", "RepoNames", "build_mapping", "extract_names", "is_reserved",
           "namespace_level", "namespace_mapping", "plan_names", "repository_identity"]
