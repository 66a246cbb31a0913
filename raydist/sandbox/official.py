"""The names SWE-bench gives an instance's prebuilt evaluation image.

The official harness names each instance's image ``<namespace>/sweb.eval.x86_64.<id>:latest``,
lower-cased, with ``__`` written ``_1776_`` (``swebench.task.checks.expected_image``); a
SWE-bench 5.x row may name its image itself (``image``). raydist builds its own instance
images from a PyPI sdist and exact pins (``raydist.sandbox.images``); these names tell a user
which official image a row without such a recipe would need.
"""
from __future__ import annotations

DEFAULT_NAMESPACE = "swebench"


def official_image_name(instance, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The official image of ``instance`` (an ``Instance``): the row's ``image`` when it has one
    (a field of ``extra``), else ``swebench.task.checks.expected_image(instance_id, namespace)``,
    e.g. ``swebench/sweb.eval.x86_64.django_1776_django-11099:latest``."""
    from swebench.task.checks import expected_image

    image = (getattr(instance, "extra", None) or {}).get("image")
    return str(image) if image else expected_image(instance.instance_id, namespace)
