"""What a worker does with one delivery of a job: start the attempt (compare-and-set), run the report under
our timeout and heartbeat, then complete, fail, cancel or hand it back — plus the stuck-job rescue.
"""
