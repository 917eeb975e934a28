"""Attempt tokens: a token names exactly the attempt it was minted for, any change to it is refused (403),
and past its expiry it is refused as expired (410)."""

from __future__ import annotations

import pytest

from app.core.attempt_tokens import AttemptClaim, TokenExpired, TokenRefused, mint, verify
from app.core.config import Settings

SETTINGS = Settings(attempt_token_secret="token-secret-for-the-tests")  # type: ignore[call-arg]
CLAIM = AttemptClaim("01JOBAAAAAAAAAAAAAAAAAAAAA", 0, 2, "acme", 2_000_000_000, "01NONCE")


def test_a_token_round_trips_its_claim() -> None:
    assert verify(mint(CLAIM, SETTINGS), SETTINGS, now_s=1_900_000_000) == CLAIM


def test_a_changed_token_is_refused_as_forged() -> None:
    token = mint(CLAIM, SETTINGS)
    other = mint(AttemptClaim(CLAIM.job_id, 0, 3, "acme", CLAIM.expires_at_s, "01NONCE"), SETTINGS)
    spliced = other.split(".")[0] + "." + token.split(".")[1]
    for bad in (spliced, token[:-2], token + "x", ""):
        with pytest.raises(TokenRefused) as caught:
            verify(bad, SETTINGS, now_s=1_900_000_000)
        assert caught.value.status == 403


def test_a_token_signed_with_another_secret_is_refused() -> None:
    other = Settings(attempt_token_secret="another-secret-entirely")  # type: ignore[call-arg]
    with pytest.raises(TokenRefused):
        verify(mint(CLAIM, other), SETTINGS, now_s=1_900_000_000)


def test_an_expired_token_is_refused_as_gone() -> None:
    with pytest.raises(TokenExpired) as caught:
        verify(mint(CLAIM, SETTINGS), SETTINGS, now_s=CLAIM.expires_at_s)
    assert caught.value.status == 410
