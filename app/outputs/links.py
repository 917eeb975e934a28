"""Signed, expiring download links that need no API key (a report delivered to people): HMAC-SHA256 over the
job id, the file name and the expiry; signing, checking, and the absolute URL a message carries.

`/d/{job_id}/{file name}?exp={unix s}&sig={urlsafe base64 of HMAC-SHA256("job_id\\nfilename\\nexp")}`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from urllib.parse import quote

from app.core.config import Settings

#: The path every link starts with (the route is app.jobs.link_routes).
LINK_PREFIX = "/d"
#: What a link is signed with outside ENV=production when DOWNLOAD_LINK_SECRET is unset.
DEV_LINK_SECRET = "dev-insecure-download-link-secret"
#: An expiry as we write it: plain decimal unix seconds (no sign, no leading zero, no spaces).
_EXP_RE = re.compile(r"[1-9][0-9]{0,11}")
_SIG_CHARS = 43  # urlsafe base64 of 32 bytes, without the padding
_SIG_PARAM = re.compile(r"([?&]sig=)[^&\s\"]*")


class LinkRefused(Exception):
    """A download link that is not served; `status` is the HTTP answer."""

    status = 403


class LinkTampered(LinkRefused):
    """The signature is missing or does not match (any part of the link was changed): 403."""

    status = 403


class LinkExpired(LinkRefused):
    """A genuine link past its expiry: 410."""

    status = 410


class LinkSecretMissing(RuntimeError):
    """In production no link is signed until DOWNLOAD_LINK_SECRET is set."""


def link_secret(settings: Settings) -> str | None:
    """DOWNLOAD_LINK_SECRET, else the dev secret outside production, else None (links are refused)."""
    if settings.download_link_secret is not None:
        return settings.download_link_secret.get_secret_value()
    return None if settings.env.lower() == "production" else DEV_LINK_SECRET


def _signature(job_id: str, filename: str, exp: str, secret: str) -> str:
    message = f"{job_id}\n{filename}\n{exp}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def sign_link(job_id: str, filename: str, expires_at_s: int, secret: str) -> str:
    """The path and query of the link to `filename` of `job_id`, valid until `expires_at_s` (unix s)."""
    exp = str(int(expires_at_s))
    if not _EXP_RE.fullmatch(exp):
        raise ValueError(f"expires_at_s must be a positive unix time, not {expires_at_s!r}")
    if not job_id or not filename or "\n" in job_id + filename:
        raise ValueError("a link needs a job id and a file name without line breaks")
    sig = _signature(job_id, filename, exp, secret)
    return f"{LINK_PREFIX}/{quote(job_id, safe='')}/{quote(filename, safe='')}?exp={exp}&sig={sig}"


def verify_link(
    job_id: str, filename: str, exp: str | None, sig: str | None, secret: str | None, now_s: float
) -> None:
    """Return if the link is genuine and not expired; raise LinkTampered (checked first: a changed expiry
    is a tampered link, not an expired one) or LinkExpired. The signature is compared in constant time."""
    if secret is None or not sig or exp is None or len(sig) != _SIG_CHARS or not _EXP_RE.fullmatch(exp):
        raise LinkTampered("the link's signature is missing or malformed")
    if "\n" in job_id + filename:
        raise LinkTampered("the link names no file")
    try:
        expected = _signature(job_id, filename, exp, secret).encode("ascii")
        given = sig.encode("ascii")
    except UnicodeEncodeError:
        raise LinkTampered("the link is not one we signed") from None
    if not hmac.compare_digest(expected, given):
        raise LinkTampered("the link's signature does not match")
    if now_s >= int(exp):
        raise LinkExpired("the link has expired")


def public_link(
    job_id: str, filename: str, settings: Settings, now_s: float, ttl_s: int | None = None
) -> str:
    """The absolute link (PUBLIC_BASE_URL + the signed path) valid for `ttl_s`, else DELIVERY_LINK_TTL_S.
    Raises LinkSecretMissing in production without DOWNLOAD_LINK_SECRET."""
    secret = link_secret(settings)
    if secret is None:
        raise LinkSecretMissing("set DOWNLOAD_LINK_SECRET to send download links in production")
    lifetime_s = settings.delivery_link_ttl_s if ttl_s is None else ttl_s
    if lifetime_s <= 0:
        raise ValueError("a link's ttl_s must be > 0")
    path = sign_link(job_id, filename, int(now_s) + int(lifetime_s), secret)
    return settings.public_base_url.rstrip("/") + path


def redact_signature(text: str) -> str:
    """`text` (a logged request line) with every link signature replaced by `***`."""
    return _SIG_PARAM.sub(r"\1***", text)
