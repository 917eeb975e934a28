"""Report types declared in a file instead of written in Python: SQL and HTTP kinds.

Each kind parses its declaration and builds the report function the registry runs.
"""
