"""Recurring report schedules: cron or interval in a time zone, one job per fire time."""
