"""Which tenants a read or a change may touch, spelled out at every call.

`EVERY_TENANT` is for admin keys and internal work (workers, the scheduler); API calls pass their key's scope.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TenantScope:
    tenant: str | None  # None: every tenant

    @classmethod
    def only(cls, tenant: str) -> TenantScope:
        return cls(tenant)


EVERY_TENANT = TenantScope(None)
