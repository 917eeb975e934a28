"""RFC 9457 problem answers: the media type and a check that an answer is one, with the expected status."""

from __future__ import annotations

from typing import Any

import httpx

PROBLEM = "application/problem+json"
#: A well-formed job id that no test ever creates.
BOGUS_ID = "01JD3Z7Q8J5Q0V6W2XKX4N9M1B"


def assert_problem(resp: httpx.Response, status: int) -> dict[str, Any]:
    """Assert `resp` is a problem+json answer with `status`, a title and a detail; returns its body."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].split(";")[0].strip() == PROBLEM, resp.headers
    body = resp.json()
    for name in ("type", "title", "status", "detail"):
        assert name in body, body
    assert body["status"] == status
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return dict(body)
