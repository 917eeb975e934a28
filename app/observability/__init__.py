"""The state the API's /metrics reports: job counts, waits, backlogs and workers, from MySQL and Redis."""
