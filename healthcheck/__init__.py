"""The ``retriever-health`` entry point for containers and scripts; the checks themselves
live in the library (:mod:`retriever.health`)."""

from retriever.health import Check, HealthReport, run_health

__all__ = ["Check", "HealthReport", "run_health"]
