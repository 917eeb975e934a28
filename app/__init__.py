"""report-orchestrator: runs report jobs reliably.

MySQL holds every job's state; Redis (arq) only carries the work.
"""
