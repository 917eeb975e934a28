"""Tracing across real processes: with only the standard OTEL_* variables set, the api, worker and
dead-letter consumer export over OTLP/HTTP to a local receiver, and their spans of a job share its trace.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.utils.fakes.otlp import OtlpReceiver
from tests.utils.fakes.receiver import SECRET, Receiver
from tests.utils.jobs import submit, wait_job
from tests.utils.polling import eventually
from tests.utils.stack import Stack

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def collector() -> Iterator[OtlpReceiver]:
    fake = OtlpReceiver().start()
    yield fake
    fake.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    fake = Receiver().start()
    yield fake
    fake.stop()


async def test_each_process_exports_its_spans_of_a_job_over_otlp_into_the_job_trace(
    stack: Stack, collector: OtlpReceiver, receiver: Receiver
) -> None:
    stack.overrides.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",  # ms: export within a tenth of a second instead of five
        CALLBACK_SECRET=SECRET,
        CALLBACK_ALLOWED_HOSTS="127.0.0.1",
    )
    stack.start_api()
    stack.start_worker()
    stack.start_dead_letter()
    async with stack.client() as client:
        job = await submit(client, None, "demo.flaky", job={"callback_url": receiver.url}, fail_times=1)
        assert (await wait_job(client, None, job["id"]))["status"] == "done"
    trace_id = job["trace_id"]
    await eventually(lambda: collector.named("callback.deliver", job["id"]), 20, "the callback span")
    await eventually(lambda: len(collector.named("attempt", job["id"])) == 2, 20, "both attempt spans")

    [submitted] = collector.named("submit", job["id"])
    attempts = collector.named("attempt", job["id"])
    [callback] = collector.named("callback.deliver", job["id"])
    assert {s.trace_id for s in (submitted, *attempts, callback)} == {trace_id}
    assert submitted.service == "report-orchestrator-api"
    assert {a.service for a in attempts} == {"report-orchestrator-worker"}
    assert callback.service == "report-orchestrator-dead-letter"
    assert sorted(str(a.attributes["attempt.outcome"]) for a in attempts) == ["failed", "succeeded"]
    # The API's request span is the root; probes are not traced.
    [server] = [s for s in collector.spans if s.trace_id == trace_id and s.parent_span_id == ""]
    assert server.name == "POST /v1/jobs" and submitted.parent_span_id == server.span_id
    assert not [s for s in collector.spans if "healthz" in s.name]
    assert [d.headers["traceparent"].split("-")[1] for d in receiver.accepted] == [trace_id]
