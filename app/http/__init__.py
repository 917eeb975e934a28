"""The HTTP kit every domain uses, below the domains: problem+json errors, pagination, fast JSON responses,
the shared wire schemas, the body cap, the API's tracing, and outbound POSTs (SSRF guard, pinned address).
"""
