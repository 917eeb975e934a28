"""How the API hands a stored output over: the file itself, the object streamed through, or a 307 to a
presigned link (the REST download and the console's).
"""

from __future__ import annotations

from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse

from app.models import ReportJob
from app.outputs.base import StoredOutput, content_disposition


def output_response(job: ReportJob, stored: StoredOutput) -> Response:
    """The file itself, the object streamed through, or a 307 to a presigned link (also the console's)."""
    media_type = job.output_content_type or "application/octet-stream"
    if stored.path is not None:
        filename = job.output_filename or stored.path.name
        return FileResponse(stored.path, media_type=media_type, filename=filename)
    if stored.link is not None:
        # The object carries the same Content-Type and Content-Disposition (stored with it at upload).
        return RedirectResponse(stored.link, status_code=307, headers={"Cache-Control": "no-store"})
    assert stored.chunks is not None
    headers = {
        "Content-Disposition": content_disposition(job.output_filename or "report.bin"),
        "Content-Length": str(stored.size),
    }
    return StreamingResponse(stored.chunks, media_type=media_type, headers=headers)
