"""What every domain uses: settings, logging, database sessions, the arq queue, ids, errors, states, backoff.

Imports no domain package (an import contract in `make test` enforces it).
"""
