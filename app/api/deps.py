"""Typed dependencies for routes: the authenticated principal (set by AuthMiddleware).

`HTTPBearer` is declared so the OpenAPI document carries the bearer security scheme.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.auth.service import Principal

bearer_scheme = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer ro_…`")


async def get_principal(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]
) -> Principal:
    principal: Principal = request.state.principal
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
