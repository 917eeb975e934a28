"""The scheduler's periodic work: rescue lost attempts, reconcile Redis with MySQL, re-publish alerts and
callbacks, archive dead letters, purge expired jobs. Safe with any number of scheduler replicas.
"""
