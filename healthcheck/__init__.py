"""Health check for retriever: is search possible, and how well? (``retriever-health``)."""

from healthcheck.checks import Check, HealthReport, run_health

__all__ = ["Check", "HealthReport", "run_health"]
