"""The measurements of `make bench`, one module each: submit, drain, pickup (with idle CPU), memory.

Each exposes `async def run(bench: Bench) -> None`, which stores its figures in `bench.results`.
"""
