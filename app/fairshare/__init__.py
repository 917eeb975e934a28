"""Fair share: priorities, tenant weights, concurrency caps and pauses, and why a waiting job waits."""
