"""The operations console under /ui: server-rendered pages over the same services as the API."""
