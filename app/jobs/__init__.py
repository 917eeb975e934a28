"""Jobs as users see them: submit (validated, idempotent), read, list, download, cancel, replay, ordering
keys and what a terminal job sets off (its callback, its ordering successor).
"""
