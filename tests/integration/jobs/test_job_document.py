"""The job document the API answers and callbacks carry is one definition, and it is the OpenAPI schema."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs

from tests.utils.workers import drain


def _schema(openapi: dict[str, Any], name: str) -> dict[str, Any]:
    """A component schema of the served document, its $refs resolvable against the same components."""
    components = openapi["components"]["schemas"]
    return {**components[name], "components": {"schemas": components}}


async def test_every_job_answer_matches_the_documented_schema_exactly(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    openapi = (await client.get("/openapi.json")).json()
    schema = _schema(openapi, "JobPublic")
    validator = jsonschema_rs.validator_for(schema)
    body = {
        "report_type": "demo.csv",
        "params": {"rows": 3},
        "ordering_key": "k",
        "callback_url": "http://127.0.0.1:9/cb",
    }
    submitted = (await client.post("/v1/jobs", headers=auth, json=body)).json()
    flaky = {"report_type": "demo.flaky", "params": {"fail_times": 9}}
    failing = (await client.post("/v1/jobs", headers=auth, json=flaky)).json()
    await drain()
    documents = [
        submitted,
        (await client.get(f"/v1/jobs/{submitted['id']}", headers=auth)).json(),
        (await client.get(f"/v1/jobs/{failing['id']}", headers=auth)).json(),
        *(await client.get("/v1/jobs", headers=auth)).json()["items"],
    ]
    assert documents[1]["status"] == "done" and documents[1]["output"] and documents[1]["callback"]
    assert documents[2]["status"] == "dead" and documents[2]["last_error"]
    for document in documents:
        validator.validate(document)
        assert set(document) == set(schema["properties"]), set(document) ^ set(schema["properties"])
