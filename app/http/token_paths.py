"""Paths authenticated by a token they carry instead of an API key: the attempt callbacks an asynchronous
HTTP report's service calls (app.reports.remote_routes), and which of them take a file upload.
"""

from __future__ import annotations

import re

ATTEMPT_CALLBACKS_PREFIX = "/v1/attempt-callbacks"
_UPLOAD = re.compile(r"^/v1/attempt-callbacks/[^/]+/complete/?$")


def token_authenticated(path: str) -> bool:
    """No API key is asked for: the token in the path is the credential, checked by the route."""
    return path.startswith(ATTEMPT_CALLBACKS_PREFIX + "/")


def is_upload(path: str) -> bool:
    """A report file's upload, held to ATTEMPT_UPLOAD_MAX_BYTES instead of MAX_BODY_BYTES."""
    return bool(_UPLOAD.match(path))
