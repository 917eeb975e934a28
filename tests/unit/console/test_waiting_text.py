"""A job's `waiting_for` as the console's job page says it."""

from __future__ import annotations

from app.console.fairshare_routes import waiting_text


def test_each_reason_reads_as_a_sentence() -> None:
    assert waiting_text(None) is None
    assert waiting_text({}) is None
    assert waiting_text({"paused": "report_type:demo.csv"}) == (
        "Waiting: report type demo.csv is paused; it starts once that is resumed."
    )
    assert waiting_text({"paused": "tenant:acme"}) == (
        "Waiting: tenant acme is paused; it starts once that is resumed."
    )
    assert waiting_text({"cap": "report_type:ledger.full", "limit": 2}) == (
        "Waiting: 2 of 2 running for report type ledger.full; it starts as soon as one of them finishes."
    )
    assert waiting_text({"cap": "tenant:acme", "limit": 10}) == (
        "Waiting: 10 of 10 running for tenant acme; it starts as soon as one of them finishes."
    )
