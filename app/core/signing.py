"""HMAC-SHA256 signatures of outgoing HTTP bodies (completion callbacks and the alert webhook).

`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`, the scheme receivers verify
(docs/how-to/callbacks.md).
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Report-Signature"
EVENT_HEADER = "X-Report-Event"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"
