"""Completion callbacks: the outbox row written with a job's terminal transition, its signed delivery
with retries, and the SSRF guard that decides where we may send requests at all.
"""
