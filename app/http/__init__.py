"""The HTTP kit every domain's routes use, below the domains: problem+json errors, pagination, fast JSON
responses, the shared wire schemas, the body cap and the API's tracing.
"""
