"""API keys and principals: keys are stored hashed, scoped to one tenant, with scopes `jobs:read`,
`jobs:write` and `admin`. The HTTP side (the bearer middleware) lives in `app/auth/http.py`.
"""
