"""Attempt tokens: a signed, expiring capability naming one attempt of one job (job id, replay, attempt,
tenant), handed to whoever runs that attempt outside our processes (an HTTP report's service).

The token proves only who it was minted for; whether that attempt is still running is the caller's check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from itsdangerous import BadData, URLSafeSerializer

from app.core.config import Settings

#: What tokens are signed with outside ENV=production when ATTEMPT_TOKEN_SECRET is unset.
DEV_TOKEN_SECRET = "dev-insecure-attempt-token-secret"
_SALT = "attempt-token.v1"


class TokenRefused(Exception):
    """A token that is not honoured; `status` is the HTTP answer (403 forged or garbled, 410 expired)."""

    status = 403


class TokenExpired(TokenRefused):
    status = 410


class TokenSecretMissing(RuntimeError):
    """In production no token is minted until ATTEMPT_TOKEN_SECRET is set."""


@dataclass(frozen=True)
class AttemptClaim:
    job_id: str
    replay: int
    attempt: int
    tenant: str
    expires_at_s: int
    nonce: str = ""  # tells apart two runs of one attempt number (an attempt handed back runs again)


def token_secret(settings: Settings) -> str | None:
    """ATTEMPT_TOKEN_SECRET, else the dev secret outside production, else None (no token is valid)."""
    if settings.attempt_token_secret is not None:
        return settings.attempt_token_secret.get_secret_value()
    return None if settings.env.lower() == "production" else DEV_TOKEN_SECRET


def _serializer(secret: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret, salt=_SALT)


def mint(claim: AttemptClaim, settings: Settings) -> str:
    secret = token_secret(settings)
    if secret is None:
        raise TokenSecretMissing("set ATTEMPT_TOKEN_SECRET to hand out attempt tokens in production")
    body = [claim.job_id, claim.replay, claim.attempt, claim.tenant, claim.expires_at_s, claim.nonce]
    return str(_serializer(secret).dumps(body))


def claim_for(job_id: str, replay: int, attempt: int, tenant: str, nonce: str, ttl_s: float) -> AttemptClaim:
    return AttemptClaim(job_id, replay, attempt, tenant, int(time.time() + ttl_s) + 1, nonce)


def verify(token: str, settings: Settings, now_s: float | None = None) -> AttemptClaim:
    """The claim of a genuine, unexpired token; TokenRefused (forged, garbled) or TokenExpired otherwise.
    The signature is checked first: a changed expiry is a forged token, not an expired one."""
    secret = token_secret(settings)
    if secret is None or not token or len(token) > 1000:
        raise TokenRefused("the attempt token is missing or not one we signed")
    try:
        body = _serializer(secret).loads(token)
    except BadData:
        raise TokenRefused("the attempt token is not one we signed") from None
    if not (isinstance(body, list) and len(body) == 6):
        raise TokenRefused("the attempt token is malformed")
    job_id, replay, attempt, tenant, expires_at_s, nonce = body
    if not all(isinstance(text, str) for text in (job_id, tenant, nonce)):
        raise TokenRefused("the attempt token is malformed")
    if not all(isinstance(n, int) for n in (replay, attempt, expires_at_s)):
        raise TokenRefused("the attempt token is malformed")
    if (time.time() if now_s is None else now_s) >= expires_at_s:
        raise TokenExpired("the attempt token has expired")
    return AttemptClaim(job_id, replay, attempt, tenant, expires_at_s, nonce)
