"""Benchmarks: ours (Postgres + pgvector) side by side with a plain SQLite reference.

Every corpus and model path is a parameter; nothing here is needed to run the project.
"""
