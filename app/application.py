"""The FastAPI application: routers, problem+json handlers, middleware, offline docs.

`create_app()` builds a fresh app (tests build several); `app.main:app` is the process's instance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from app.attempts import routes as attempts_routes
from app.auth.http import AuthMiddleware
from app.console import destination_routes as console_destination_routes
from app.console import fairshare_routes as console_fairshare_routes
from app.console import job_routes as console_job_routes
from app.console import letter_routes as console_letter_routes
from app.console import routes as console_routes
from app.console import schedule_routes as console_schedule_routes
from app.console import web as console_web
from app.core import failpoints, redis_pool
from app.core.config import get_settings
from app.core.db import dispose_engine, get_engine
from app.core.heap import freeze_startup_heap
from app.core.logs import setup_logging
from app.dead_letters import routes as dead_letters_routes
from app.destinations import routes as destinations_routes
from app.fairshare import routes as fairshare_routes
from app.fleet import routes as fleet_routes
from app.http import errors, tracing
from app.http.body_limit import BodyLimitMiddleware
from app.http.responses import FastJSONResponse
from app.jobs import link_routes
from app.jobs import routes as jobs_routes
from app.observability import routes as observability_routes
from app.reports import remote_routes
from app.reports import routes as reports_routes
from app.reports.declared import declarations, start_watching
from app.reports.registry import registry
from app.schedules import routes as schedules_routes

DESCRIPTION = """Submit report jobs, poll them, download their files.

Failed attempts retry with exponential backoff; jobs that still fail become dead letters.
Authenticate with `Authorization: Bearer <api key>` (create one with `reportctl keys create`)."""


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    settings = get_settings()
    setup_logging("api")
    failpoints.arm_from_environment()  # none unless a test or the soak names some
    registry.load(settings.enable_demo_reports, settings.report_modules)
    declarations.load_now()  # a broken REPORT_TYPES_FILE is logged and shown; the Python types serve
    declared = start_watching()
    get_engine()
    freeze_startup_heap()
    try:
        yield
    finally:
        await declared.stop()
        await redis_pool.close_pool()
        await dispose_engine()


def operation_id(route: APIRoute) -> str:
    """The route function's name (`submit_job`, `get_job` …): what a generated client calls its methods."""
    return route.name


def create_app() -> FastAPI:
    settings = get_settings()
    registry.load(settings.enable_demo_reports, settings.report_modules)
    declarations.load_now()
    app = FastAPIOffline(
        default_response_class=FastJSONResponse,
        title="report-orchestrator",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
    )
    errors.install(app)
    for router in (
        jobs_routes.router,
        attempts_routes.router,
        dead_letters_routes.router,
        jobs_routes.letters_router,
        schedules_routes.router,
        destinations_routes.router,
        reports_routes.router,
        fairshare_routes.router,
        fleet_routes.router,
        console_routes.router,
        console_job_routes.router,
        console_letter_routes.router,
        console_destination_routes.router,
        console_schedule_routes.router,
        console_fairshare_routes.router,
        observability_routes.router,
        link_routes.router,  # /d/…: delivered reports' signed download links, no API key
        remote_routes.router,  # /v1/attempt-callbacks/{token}/…: HTTP reports' services, no API key
    ):
        app.include_router(router)
    link_routes.install_log_redaction()
    remote_routes.install_log_redaction()
    console_web.install(app)
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AuthMiddleware)
    tracing.instrument(app)  # outermost, so 401s and 413s are traced too; nothing when tracing is off
    return app
