"""Dead letters: the record of a job that used up its attempts or failed permanently, its alerts to every
configured sink, archive and purge. Replaying one is a jobs use case (`app.jobs.service.replay`).
"""
