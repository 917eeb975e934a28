"""Benchmarks for report-orchestrator against raw arq and Celery, all in one run: `make bench`.

bench/run.py runs bench/phases/ (one module per measurement); bench/results/ keeps the figures of past runs.
"""
