"""Wire schemas of fair share: a tenant's and a report type's policy documents (weight, caps, pause, slots
held now) and the PATCH bodies that change them. Built from app.fairshare.service's views with `.of()`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.fairshare.service import TenantView, TypeCap, TypeView

MAX_WEIGHT = 1000
MAX_CAP = 100_000

CapSource = Literal["override", "setting", "declared"]


class TenantPolicyPublic(BaseModel):
    tenant: str
    weight: int = Field(description="Share of the free slots among tenants with jobs of equal priority")
    max_running: int | None = Field(description="The tenant's own running cap; null: TENANT_MAX_RUNNING")
    effective_max_running: int | None = Field(description="The cap in force; null: no cap")
    paused: bool = Field(description="No job of the tenant starts; running ones finish")
    running: int = Field(description="The tenant's jobs running now, across every worker")

    @classmethod
    def of(cls, view: TenantView) -> TenantPolicyPublic:
        return cls(
            tenant=view.tenant,
            weight=view.weight,
            max_running=view.max_running,
            effective_max_running=view.effective_max_running,
            paused=view.paused,
            running=view.running,
        )


class TenantPolicyList(BaseModel):
    items: list[TenantPolicyPublic] = Field(
        description="Tenants with a policy of their own or jobs running now, by name"
    )


class CapPublic(BaseModel):
    limit: int | None = Field(description="At most this many running at once; null: no cap")
    source: CapSource | None = Field(
        description="`override` (PATCH / reportctl), `setting` (REPORT_TYPE_MAX_CONCURRENCY), `declared` "
        "(the report type's own max_concurrency), null when there is no cap"
    )

    @classmethod
    def of(cls, cap: TypeCap) -> CapPublic:
        source: CapSource | None = cap.source  # type: ignore[assignment]  # one of the three, or None
        return cls(limit=cap.limit, source=source)


class ReportTypePolicyPublic(BaseModel):
    name: str
    priority: int = Field(description="The default priority of the type's jobs (a submit may name another)")
    max_concurrency: CapPublic
    paused: bool = Field(description="No job of the type starts; running ones finish")
    running: int = Field(description="The type's jobs running now, across every worker")

    @classmethod
    def of(cls, view: TypeView) -> ReportTypePolicyPublic:
        return cls(
            name=view.report_type,
            priority=view.priority,
            max_concurrency=CapPublic.of(view.max_concurrency),
            paused=view.paused,
            running=view.running,
        )


class ReportTypePolicyList(BaseModel):
    items: list[ReportTypePolicyPublic] = Field(description="Every registered report type, by name")


class TenantPolicyPatch(BaseModel):
    """Fields left out keep their value."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"weight": 3, "max_running": 5}]}
    )

    weight: int = Field(1, ge=1, le=MAX_WEIGHT, description="1–1000 (default 1)")
    max_running: int | None = Field(
        None, ge=1, le=MAX_CAP, description="The tenant's running cap; null: back to TENANT_MAX_RUNNING"
    )

    def changes(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in sorted(self.model_fields_set)}


class ReportTypePolicyPatch(BaseModel):
    """Fields left out keep their value."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"max_concurrency": 2}]}
    )

    max_concurrency: int | None = Field(
        None,
        ge=1,
        le=MAX_CAP,
        description="At most this many of the type's jobs run at once; null: back to "
        "REPORT_TYPE_MAX_CONCURRENCY, else what the type declares",
    )

    def changes(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in sorted(self.model_fields_set)}
