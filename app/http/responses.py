"""JSON responses: orjson for plain documents, pydantic-core's own serializer for wire models.

A route that answers a model with its own status or headers uses `model_response`, so the body is exactly
the model (validated when it was built) without FastAPI validating it a second time.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def model_response(
    model: BaseModel, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        model.__pydantic_serializer__.to_json(model),
        status_code=status_code,
        headers=headers,
        media_type="application/json",
    )
