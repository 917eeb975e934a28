"""Fair-share administration (admin scope, checked by `AuthMiddleware`): tenants' weights, caps and pauses
under /v1/tenants; report types' caps and pauses under /v1/report-types/{name}, listed at
/v1/fair-share/report-types (GET /v1/report-types stays the jobs:read catalogue).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.auth.http import PrincipalDep
from app.core.tenancy import TENANT_RE
from app.fairshare import service
from app.fairshare.schemas import (
    ReportTypePolicyList,
    ReportTypePolicyPatch,
    ReportTypePolicyPublic,
    TenantPolicyList,
    TenantPolicyPatch,
    TenantPolicyPublic,
)
from app.http.errors import problem_responses

router = APIRouter(tags=["fair share"])

Tenant = Annotated[
    str,
    Path(
        pattern=f"^{TENANT_RE.pattern}$",
        description="A tenant (lowercase slug: 1–64 of a-z 0-9 . _ : -, starting with a letter or digit)",
    ),
]
TypeName = Annotated[str, Path(min_length=1, max_length=100, description="A registered report type name")]

READ = problem_responses(401, 403, 422, 503)
TYPE_READ = problem_responses(401, 403, 404, 422, 503)


# ---- tenants ---------------------------------------------------------------------------------------------


@router.get("/v1/tenants", response_model=TenantPolicyList, responses=READ, summary="Tenants' fair share")
async def list_tenants(_principal: PrincipalDep) -> TenantPolicyList:
    """Tenants with a policy of their own or jobs running now; any other tenant has weight 1, the
    TENANT_MAX_RUNNING cap and is not paused."""
    return TenantPolicyList(items=[TenantPolicyPublic.of(view) for view in await service.list_tenants()])


@router.get(
    "/v1/tenants/{tenant}", response_model=TenantPolicyPublic, responses=READ, summary="A tenant's fair share"
)
async def get_tenant(tenant: Tenant, _principal: PrincipalDep) -> TenantPolicyPublic:
    return TenantPolicyPublic.of(await service.get_tenant(tenant))


@router.patch(
    "/v1/tenants/{tenant}",
    response_model=TenantPolicyPublic,
    responses=READ,
    summary="Change a tenant's weight or running cap",
)
async def patch_tenant(
    tenant: Tenant, body: TenantPolicyPatch, _principal: PrincipalDep
) -> TenantPolicyPublic:
    """Only the fields given change; `max_running: null` goes back to TENANT_MAX_RUNNING. Workers obey at once
    (a lower cap stops new starts; running jobs finish)."""
    changes = body.changes()
    view = await service.set_tenant(tenant, changes) if changes else await service.get_tenant(tenant)
    return TenantPolicyPublic.of(view)


@router.post(
    "/v1/tenants/{tenant}/pause", response_model=TenantPolicyPublic, responses=READ, summary="Pause a tenant"
)
async def pause_tenant(tenant: Tenant, _principal: PrincipalDep) -> TenantPolicyPublic:
    """None of the tenant's jobs starts until resumed (they stay pending, `waiting_for` says why); running
    ones finish. Pausing a paused tenant changes nothing."""
    return TenantPolicyPublic.of(await service.set_tenant(tenant, {"paused": True}))


@router.post(
    "/v1/tenants/{tenant}/resume",
    response_model=TenantPolicyPublic,
    responses=READ,
    summary="Resume a tenant",
)
async def resume_tenant(tenant: Tenant, _principal: PrincipalDep) -> TenantPolicyPublic:
    return TenantPolicyPublic.of(await service.set_tenant(tenant, {"paused": False}))


# ---- report types ----------------------------------------------------------------------------------------


@router.get(
    "/v1/fair-share/report-types",
    response_model=ReportTypePolicyList,
    responses=problem_responses(401, 403, 503),
    summary="Report types' priorities, caps and pauses",
)
async def list_report_type_policies(_principal: PrincipalDep) -> ReportTypePolicyList:
    return ReportTypePolicyList(
        items=[ReportTypePolicyPublic.of(view) for view in await service.list_types()]
    )


@router.get(
    "/v1/report-types/{name}/policy",
    response_model=ReportTypePolicyPublic,
    responses=TYPE_READ,
    summary="A report type's priority, cap and pause",
)
async def get_report_type_policy(name: TypeName, _principal: PrincipalDep) -> ReportTypePolicyPublic:
    return ReportTypePolicyPublic.of(await service.get_type(name))


@router.patch(
    "/v1/report-types/{name}",
    response_model=ReportTypePolicyPublic,
    responses=TYPE_READ,
    summary="Change a report type's concurrency cap",
)
async def patch_report_type(
    name: TypeName, body: ReportTypePolicyPatch, _principal: PrincipalDep
) -> ReportTypePolicyPublic:
    """`max_concurrency: null` goes back to REPORT_TYPE_MAX_CONCURRENCY, else to what the type declares.
    Counted across every worker; a lower cap stops new starts, running jobs finish."""
    changes = body.changes()
    view = await service.set_type(name, changes) if changes else await service.get_type(name)
    return ReportTypePolicyPublic.of(view)


@router.post(
    "/v1/report-types/{name}/pause",
    response_model=ReportTypePolicyPublic,
    responses=TYPE_READ,
    summary="Pause a report type",
)
async def pause_report_type(name: TypeName, _principal: PrincipalDep) -> ReportTypePolicyPublic:
    """No job of the type starts until resumed (they stay pending, `waiting_for` says why); running ones
    finish. Pausing a paused type changes nothing."""
    return ReportTypePolicyPublic.of(await service.set_type(name, {"paused": True}))


@router.post(
    "/v1/report-types/{name}/resume",
    response_model=ReportTypePolicyPublic,
    responses=TYPE_READ,
    summary="Resume a report type",
)
async def resume_report_type(name: TypeName, _principal: PrincipalDep) -> ReportTypePolicyPublic:
    """Its waiting jobs start as slots free, in priority and fair-share order."""
    return ReportTypePolicyPublic.of(await service.set_type(name, {"paused": False}))
