"""Report types declared in a file (REPORT_TYPES_FILE, TOML) instead of written in Python: SQL reports to
CSV/XLSX over read-only data sources, and other kinds plugged in through app/reports/declared/kinds.py.

A declared type is a normal `ReportType` in the registry, so every guarantee applies to it unchanged.
"""

from app.reports.declared.errors import DeclarationError
from app.reports.declared.service import Declarations, Status, Watch, declarations, start_watching

__all__ = ["DeclarationError", "Declarations", "Status", "Watch", "declarations", "start_watching"]
