"""`reportctl destinations …`, `reportctl submit --deliver-to` and `reportctl deliveries` against a real API
process: a secret read from the environment never printed; a refusal exits 1 with the problem printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.utils.keys import make_key
from tests.utils.live_api import live_api, reportctl
from tests.utils.workers import drain, drain_alerts

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def api_url(base_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_api(tmp_path_factory.mktemp("api-logs")) as url:
        yield url


@pytest.fixture
async def key(env: Any) -> str:
    return (await make_key())["Authorization"].removeprefix("Bearer ")


async def test_a_destination_made_listed_used_and_deleted_with_reportctl(
    api_url: str, key: str, receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = receiver.secret  # the receiver checks the signatures with it
    monkeypatch.setenv("HOOK_SECRET", secret)
    code, out, err = await reportctl(
        api_url, key, "destinations", "create", "--kind", "webhook", "--name", "warehouse-hook",
        "--field", f"url={receiver.url}", "--secret-env", "secret=HOOK_SECRET",
    )  # fmt: skip
    assert code == 0, out + err
    made = json.loads(out)
    assert made["secrets_set"] == ["secret"] and secret not in out + err
    code, out, _ = await reportctl(api_url, key, "destinations", "list")
    assert code == 0 and "warehouse-hook" in out and secret not in out

    code, out, err = await reportctl(
        api_url, key, "submit", "demo.csv", "-p", "rows=2", "--deliver-to", "warehouse-hook"
    )
    assert code == 0, out + err
    job_id = json.loads(out)["id"]
    await drain()
    await drain_alerts()
    code, out, _ = await reportctl(api_url, key, "deliveries", job_id)
    assert code == 0 and "warehouse-hook" in out and " sent " in out
    assert len(receiver.accepted) == 1

    code, out, _ = await reportctl(
        api_url, key, "submit", "demo.csv", "-p", "rows=2", "--deliver-to", "nowhere"
    )
    assert code == 1 and "nowhere" in out
    code, _, err = await reportctl(api_url, key, "destinations", "create", "--kind", "webhook", "--name", "x",
                                   "--secret-env", "secret=NOT_SET_ANYWHERE")  # fmt: skip
    assert code == 2 and "NOT_SET_ANYWHERE" in err
    code, _, _ = await reportctl(api_url, key, "destinations", "delete", made["id"])
    assert code == 0
