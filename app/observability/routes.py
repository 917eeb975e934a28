"""Liveness, readiness, Prometheus metrics, and the root path.

`/healthz` does no I/O; `/readyz` checks MySQL and Redis with short timeouts; `GET /` opens the console.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, RedirectResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.core import db, redis_pool
from app.core.metrics import counters_exposition
from app.http.errors import problem, problem_responses
from app.observability.collector import exposition
from app.observability.schemas import Health
from app.observability.service import snapshot

router = APIRouter(tags=["health"])

READY_TIMEOUT_S = 2.0


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=307)


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics (bind privately)",
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}},
)
async def metrics() -> Response:
    """This process's counters and histograms, then the state gauges (cached for METRICS_CACHE_S)."""
    body = counters_exposition() + exposition(await snapshot())
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", response_model=Health, summary="Liveness (no I/O)")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses=problem_responses(503),
    summary="Readiness: MySQL and Redis reachable",
)
async def readyz() -> JSONResponse:
    checks: dict[str, str] = {}
    for name, check in (("database", db.ping), ("redis", redis_pool.ping)):
        try:
            await asyncio.wait_for(check(), READY_TIMEOUT_S)
            checks[name] = "ok"
        except Exception as exc:
            checks[name] = f"unavailable: {type(exc).__name__}"
    if all(v == "ok" for v in checks.values()):
        return JSONResponse({"status": "ok", "checks": checks})
    return problem(503, "A dependency is unreachable.", extra={"checks": checks})
