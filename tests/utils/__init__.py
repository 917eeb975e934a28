"""Helpers shared by the tests; conftest.py files keep only fixtures and import from here."""
