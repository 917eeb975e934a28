"""Tenants: what a tenant name may be, and which tenants a read or a change may touch (spelled out at every
call).

`EVERY_TENANT` is for admin keys and internal work (workers, the scheduler); API calls pass their key's scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: What a tenant name may be: lowercase letters, digits and `._:-`, 1 to 64 characters.
TENANT_RE = re.compile(r"[a-z0-9][a-z0-9._:-]{0,63}")


@dataclass(frozen=True, slots=True)
class TenantScope:
    tenant: str | None  # None: every tenant

    @classmethod
    def only(cls, tenant: str) -> TenantScope:
        return cls(tenant)


EVERY_TENANT = TenantScope(None)
