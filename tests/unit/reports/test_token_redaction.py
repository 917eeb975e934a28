"""Attempt tokens are credentials: the access log shows the attempt-callback paths without them."""

from __future__ import annotations

import logging

from app.reports.remote_routes import TokenRedaction


def test_the_access_log_shows_attempt_callbacks_without_their_token() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        (
            "127.0.0.1:5000",
            "POST",
            "/v1/attempt-callbacks/WyIwMUoiLDBd.abc-_x/complete?filename=a.csv",
            "1.1",
            202,
        ),
        None,
    )
    assert TokenRedaction().filter(record)
    assert record.getMessage() == (
        '127.0.0.1:5000 - "POST /v1/attempt-callbacks/***/complete?filename=a.csv HTTP/1.1" 202'
    )
