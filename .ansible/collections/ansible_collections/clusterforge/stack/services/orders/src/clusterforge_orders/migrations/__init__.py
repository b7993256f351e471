"""Alembic migrations of the order service's schema (run by ``Database.migrate``)."""
