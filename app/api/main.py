"""The FastAPI application: routers, problem+json handlers, middleware, offline docs.

`create_app()` builds a fresh app (tests build several); `app.main:app` is the process's instance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app import queue
from app.api import errors
from app.api.middleware import AuthMiddleware, BodyLimitMiddleware
from app.api.responses import FastJSONResponse
from app.api.routes import dead_letters, jobs, meta
from app.config import get_settings
from app.db import dispose_engine, get_engine
from app.logging_setup import setup_logging
from app.reports.registry import registry

DESCRIPTION = """Submit report jobs, poll them, download their files.

Failed attempts retry with exponential backoff; jobs that still fail become dead letters.
Authenticate with `Authorization: Bearer <api key>` (create one with `reportctl keys create`)."""


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    settings = get_settings()
    setup_logging("api")
    registry.load(settings.enable_demo_reports, settings.report_modules)
    get_engine()
    try:
        yield
    finally:
        await queue.close_pool()
        await dispose_engine()


def create_app() -> FastAPI:
    settings = get_settings()
    registry.load(settings.enable_demo_reports, settings.report_modules)
    app = FastAPIOffline(
        default_response_class=FastJSONResponse,
        title="report-orchestrator",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    errors.install(app)
    app.include_router(jobs.router)
    app.include_router(dead_letters.router)
    app.include_router(meta.router)
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AuthMiddleware)
    return app
