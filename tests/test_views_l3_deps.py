"""Definition-time dependency edges of L3 (SchrodingerRepo §III-D) on hand-written modules."""

from __future__ import annotations

import textwrap

from raydist.views.l3.reorder import definition_graphs


def graphs(source: str) -> list[tuple[list[str], list[tuple[int, int]]]]:
    return definition_graphs(textwrap.dedent(source))


def test_decorator_defined_earlier_precedes_its_use():
    assert graphs(
        """
        def deco(f):
            return f

        @deco
        def g():
            pass
        """
    ) == [(["deco", "g"], [(0, 1)])]


def test_decorator_defined_later_stays_after_its_reader():
    # At g's definition `deco` is not yet the later function: the later def must not overtake g.
    assert graphs(
        """
        @deco
        def g():
            pass

        def deco(f):
            return f
        """
    ) == [(["g", "deco"], [(0, 1)])]


def test_default_value_and_annotations_are_read():
    assert graphs(
        """
        def make():
            return 1

        class T:
            pass

        def f(x=make(), y: T = None) -> int:
            pass

        def unrelated():
            pass
        """
    ) == [(["make", "T", "f", "unrelated"], [(0, 2), (1, 2)])]


def test_future_annotations_are_not_read():
    assert graphs(
        """
        from __future__ import annotations

        class T:
            pass

        def f(y: T) -> T:
            pass
        """
    ) == [(["T", "f"], [])]


def test_base_class_and_keywords_are_read():
    assert graphs(
        """
        class Meta(type):
            pass

        class Base:
            pass

        class Child(Base, metaclass=Meta):
            pass
        """
    ) == [(["Meta", "Base", "Child"], [(0, 2), (1, 2)])]


def test_class_body_statements_are_read_but_function_bodies_are_not():
    assert graphs(
        """
        def helper():
            return 1

        def late():
            return 2

        class A:
            x = helper()

            def method(self):
                return late()
        """
    ) == [(["helper", "late", "A"], [(0, 2)])]


def test_property_and_setter_are_one_block():
    # The getter and its setter move together (getter first): one node of the run.
    assert graphs(
        """
        class A:
            @property
            def value(self):
                return 1

            @value.setter
            def value(self, v):
                pass

            def other(self):
                pass
        """
    ) == [(["value", "other"], [])]


def test_redefinition_binds_reader_between_the_two_definitions():
    # g reads the first f; the second f must stay after g, and the two f keep their order.
    assert graphs(
        """
        def f():
            return 1

        def g(x=f()):
            pass

        def f():
            return 2
        """
    ) == [(["f", "g", "f"], [(0, 1), (0, 2), (1, 2)])]


def test_function_called_at_definition_time_brings_its_body_reads():
    # `register` runs when `task` is decorated and calls `_name`, so `_name` must exist then.
    assert graphs(
        """
        def _name(f):
            return f.__name__

        def register(f):
            REGISTRY[_name(f)] = f
            return f

        @register
        def task():
            pass
        """
    ) == [(["_name", "register", "task"], [(0, 2), (1, 2)])]


def test_attribute_names_and_keywords_are_not_reads():
    assert graphs(
        """
        def value():
            pass

        def key():
            pass

        @obj.value
        def f(x=call(key=1)):
            pass
        """
    ) == [(["value", "key", "f"], [])]


def test_anchor_splits_runs():
    assert graphs(
        """
        def a():
            pass

        def b():
            pass

        X = 1

        def c():
            pass

        def d(x=c):
            pass
        """
    ) == [(["a", "b"], []), (["c", "d"], [(0, 1)])]
