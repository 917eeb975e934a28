"""The live worker registry: every worker, dead-letter consumer and scheduler announces itself, beats every
WORKER_HEARTBEAT_S and leaves on a clean stop; a silent one is listed as gone, then purged after a day.
"""
