"""The HTTP layer: the only package that knows about requests, responses and status codes."""
