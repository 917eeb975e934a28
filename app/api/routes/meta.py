"""Report types, health and readiness.

`/healthz` does no I/O; `/readyz` checks MySQL and Redis with short timeouts.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import queue
from app.api.deps import PrincipalDep
from app.api.errors import problem_responses
from app.api.schemas import Health, ReportTypePublic
from app.config import get_settings
from app.db import session_scope
from app.reports.registry import registry
from app.repository import Repository

router = APIRouter()

READY_TIMEOUT_S = 2.0


@router.get(
    "/v1/report-types",
    response_model=list[ReportTypePublic],
    tags=["report types"],
    responses=problem_responses(401, 403),
    summary="Registered report types",
)
async def report_types(_principal: PrincipalDep) -> list[ReportTypePublic]:
    settings = get_settings()
    return [
        ReportTypePublic.of(t, settings.job_timeout_s, settings.default_max_attempts) for t in registry.all()
    ]


@router.get(
    "/metrics",
    tags=["health"],
    response_class=Response,
    summary="Prometheus metrics (bind privately)",
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}},
)
async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", response_model=Health, tags=["health"], summary="Liveness (no I/O)")
async def healthz() -> Health:
    return Health(status="ok")


async def _check_db() -> None:
    async with session_scope() as session:
        await Repository(session).ping()


@router.get(
    "/readyz",
    response_model=Health,
    tags=["health"],
    responses=problem_responses(503),
    summary="Readiness: MySQL and Redis reachable",
)
async def readyz() -> JSONResponse:
    checks: dict[str, str] = {}
    for name, check in (("database", _check_db), ("redis", queue.ping)):
        try:
            await asyncio.wait_for(check(), READY_TIMEOUT_S)
            checks[name] = "ok"
        except Exception as exc:
            checks[name] = f"unavailable: {type(exc).__name__}"
    if all(v == "ok" for v in checks.values()):
        return JSONResponse({"status": "ok", "checks": checks})
    return JSONResponse(
        {
            "type": "/problems/service-unavailable",
            "title": "Service Unavailable",
            "status": 503,
            "detail": "A dependency is unreachable.",
            "checks": checks,
        },
        status_code=503,
        media_type="application/problem+json",
    )
