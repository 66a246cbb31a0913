"""Errors of the cluster stages that other packages raise too (L4's test gate raises
``PreparationError``), kept in a leaf module so neither side imports the other's stage."""

from __future__ import annotations

from raydist.outcomes import InfrastructureError, InputError


class PreparationError(InfrastructureError):
    """The model server or Docker failed while preparing a view (infrastructure: retried)."""

    default_cause = "view_preparation"


class UnitInputError(InputError):
    """The instance itself cannot be run as given (recorded, not retried)."""
