"""The registry of levels (raydist.views.levels): what each level is, the order a composition
applies them in, which need prepared inputs, and what registering may not do."""

from __future__ import annotations

import pytest

from raydist.views import LEVELS, implemented_levels, known_levels, levels_needing, parse_level, register_level
from raydist.views.l0 import canonical
from raydist.views.l2.namespace import namespace_level


def test_the_registry_holds_the_five_levels_of_the_paper():
    assert known_levels() == ["L0", "L1", "L2", "L3", "L4"]
    assert implemented_levels() == ["L0", "L1", "L2", "L3", "L4", "full"]
    assert (LEVELS["L0"].build, LEVELS["L2"].build) == (canonical, namespace_level)


def test_a_composition_applies_statement_then_content_then_names_whatever_the_order_written():
    assert parse_level("L2+L3+L4+L1") == ["L1", "L4", "L3", "L2"]
    assert parse_level("full") == ["L1", "L4", "L3", "L2"]


def test_only_l1_and_l4_need_prepared_inputs():
    assert levels_needing("full") == {"L1", "L4"}
    assert levels_needing("L0+L2+L3") == set()


def test_a_second_function_under_a_registered_name_is_refused():
    with pytest.raises(ValueError, match=r"level 'L0' is already registered by raydist.views.l0"):
        register_level("L0", order=0)(lambda *args: args[0])


@pytest.mark.parametrize("name", ["", "L1+L2", "full"])
def test_a_name_that_is_empty_joined_or_an_alias_is_refused(name):
    with pytest.raises(ValueError, match="must be non-empty, must not contain '\\+' and must not be an alias"):
        register_level(name, order=50)
