"""Senders: one message to one destination kind (robots, email, webhook), accepted or `SendError`."""
