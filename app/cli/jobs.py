"""`reportctl status | replay | cancel JOB_ID`: one job over the API (`reportctl submit` makes jobs, in
app/cli/submit.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, print_response


def status(
    job_id: str,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job is terminal")] = False,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Print a job; with --wait, long-poll until it is done, dead or cancelled."""
    with api_client(api_url, api_key) as client:
        while True:
            resp = client.get(f"/v1/jobs/{job_id}", params={"wait": 30} if wait else None)
            if not wait or resp.status_code != 200 or resp.json()["status"] in ("done", "dead", "cancelled"):
                break
        print_response(resp)


def replay(job_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = "") -> None:
    """Replay a dead or cancelled job (attempts reset, replay_count + 1)."""
    with api_client(api_url, api_key) as client:
        print_response(client.post(f"/v1/jobs/{job_id}/replay"))


def cancel(job_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = "") -> None:
    """Cancel a pending, scheduled, retrying or running job."""
    with api_client(api_url, api_key) as client:
        print_response(client.post(f"/v1/jobs/{job_id}/cancel"))
