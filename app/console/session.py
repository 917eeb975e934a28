"""The console's signed cookies (itsdangerous): the session (which API key signed in, its CSRF token, for
CONSOLE_SESSION_TTL_S), the login form's CSRF token and one-shot flash messages. No HTTP types here.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from functools import lru_cache

from itsdangerous import BadSignature, URLSafeTimedSerializer

from app.core.config import get_settings

log = logging.getLogger(__name__)

SESSION_COOKIE = "ro_session"
LOGIN_CSRF_COOKIE = "ro_login_csrf"
FLASH_COOKIE = "ro_flash"
FLASH_MAX_AGE_S = 60


@dataclass(frozen=True)
class ConsoleSession:
    key_id: str
    csrf: str


@dataclass(frozen=True)
class Flash:
    kind: str  # ok | error
    text: str


@lru_cache(maxsize=1)
def _secret() -> str:
    configured = get_settings().console_secret
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    log.warning("CONSOLE_SECRET is not set: console sessions last only as long as this API process")
    return secrets.token_urlsafe(32)


def forget_secret() -> None:
    _secret.cache_clear()


def _signer(purpose: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(), salt=f"report-orchestrator.console.{purpose}")


def new_token() -> str:
    return secrets.token_urlsafe(24)


def open_session(key_id: str) -> tuple[ConsoleSession, str]:
    """A fresh session (new CSRF token) and the cookie value that carries it."""
    session = ConsoleSession(key_id, new_token())
    return session, _signer("session").dumps({"k": session.key_id, "c": session.csrf})


def read_session(cookie: str | None) -> ConsoleSession | None:
    if not cookie:
        return None
    try:
        data = _signer("session").loads(cookie, max_age=int(get_settings().console_session_ttl_s))
    except BadSignature:  # also SignatureExpired
        return None
    if not isinstance(data, dict) or not isinstance(data.get("k"), str) or not isinstance(data.get("c"), str):
        return None
    return ConsoleSession(data["k"], data["c"])


def tokens_match(expected: str | None, given: str | None) -> bool:
    return bool(expected) and bool(given) and secrets.compare_digest(str(expected), str(given))


def sign_flash(flash: Flash) -> str:
    return _signer("flash").dumps([flash.kind, flash.text[:500]])


def read_flash(cookie: str | None) -> Flash | None:
    if not cookie:
        return None
    try:
        kind, text = _signer("flash").loads(cookie, max_age=FLASH_MAX_AGE_S)
    except (BadSignature, ValueError, TypeError):
        return None
    return Flash(str(kind), str(text))
