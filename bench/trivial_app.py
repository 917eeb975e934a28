"""The API exactly as `app.main:app` builds it, plus `POST /bench/noop` returning `{}` (the HTTP ceiling).

Served by uvicorn for both submit measurements so the ceiling and the job POST share one server.
"""

from __future__ import annotations

from fastapi import FastAPI

from app.application import create_app


async def bench_noop() -> dict[str, object]:
    return {}


def build() -> FastAPI:
    application = create_app()
    application.add_api_route("/bench/noop", bench_noop, methods=["POST"], include_in_schema=False)
    return application


app = build()
