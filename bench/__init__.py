"""Benchmarks for report-orchestrator against raw arq and Celery, all in one run: `make bench`.

See bench/run.py for what is measured and bench/results/ for the figures of past runs.
"""
