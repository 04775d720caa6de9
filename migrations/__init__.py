"""Alembic migrations for retriever (the only way the schema changes)."""
