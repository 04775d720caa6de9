"""Alembic environment: connects with psycopg 3 to the libpq URL given by retriever."""

from __future__ import annotations

import os

import psycopg
from alembic import context
from sqlalchemy import create_engine, pool

config = context.config
url = config.attributes.get("libpq_url") or os.environ.get("DATABASE_URL")
if not url:
    raise RuntimeError("run migrations through `retriever db upgrade` (or set DATABASE_URL)")

engine = create_engine(
    "postgresql+psycopg://", creator=lambda: psycopg.connect(url), poolclass=pool.NullPool
)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
