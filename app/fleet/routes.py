"""/v1/workers (admin): the worker, dead-letter and scheduler processes in the registry, live by default.

Admin only (the scope is checked by `AuthMiddleware` before the route runs): it shows hosts and pids.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.auth.http import PrincipalDep
from app.fleet import service
from app.fleet.schemas import StateFilter, WorkerList, WorkerPublic
from app.http.errors import problem_responses

router = APIRouter(prefix="/v1/workers", tags=["workers"])


@router.get(
    "",
    response_model=WorkerList,
    responses=problem_responses(401, 403, 422, 503),
    summary="Worker processes: live ones, or all including gone (admin)",
)
async def list_workers(
    _principal: PrincipalDep,
    state: Annotated[
        StateFilter,
        Query(description="`live`: heartbeat within 1.5 × WORKER_HEARTBEAT_S; `all`: gone ones too"),
    ] = "live",
) -> WorkerList:
    listed = await service.list_processes(include_gone=state == "all")
    return WorkerList(items=[WorkerPublic.of(p.row, p.state) for p in listed])
