"""``ingest`` with ``durable: true`` on a message: the caller (a memory tool's "remember
this fact") says it is a fact, and it is kept in durable memory whatever the admission gate
scores (issue 34, item 8)."""

from __future__ import annotations

from tests.memory_rpc.conftest import Harness

# The gate keeps none of these: a statement about a thing of the user's world with a
# definite-article subject, and a model's note of what was asked.
UNGATED = "The cat sleeps on the radiator all winter."


async def test_a_stated_fact_is_durable_whatever_the_gate_says(harness: Harness) -> None:
    rpc = harness.call
    base = {"sessionId": "s1", "userId": "u", "explain": True}
    plain = await rpc(
        "ingest", {**base, "messages": [{"id": "m1", "role": "user", "content": UNGATED}]}
    )
    [said] = plain["messages"]
    assert said["durable"] is False and said["reason"].startswith("stored; not durable")
    stated = await rpc(
        "ingest",
        {
            **base,
            "messages": [
                {"id": "m2", "role": "user", "content": UNGATED, "durable": True},
                {"id": "m3", "role": "assistant", "content": "Oscar is 14.", "durable": True},
            ],
        },
    )
    fact, note = stated["messages"]
    assert fact["durable"] is True and note["durable"] is True
    assert fact["reason"].startswith("durable: stated as a fact (gate score")
    assert fact["gate"]["score"] < fact["gate"]["threshold"]  # the gate alone says no
    got = await rpc("memory.get", {"userId": "u", "collection": "user:u", "id": "s1:m2"})
    record = got["record"]
    assert record["text"] == UNGATED and record["metadata"]["stated_fact"] is True
    assert record["metadata"]["gating_admitted"] is False  # the gate's own decision, kept
    raw = await rpc("memory.get", {"userId": "u", "collection": "session_raw:s1", "id": "m2"})
    assert raw["record"]["metadata"]["stated_fact"] is True
    missing = await rpc(
        "memory.get", {"userId": "u", "collection": "user:u", "id": "s1:m1"}, error=True
    )
    assert missing["code"] == -32002  # the same text said plainly stayed out


async def test_durable_must_be_a_boolean(harness: Harness) -> None:
    refused = await harness.call(
        "ingest",
        {
            "sessionId": "s1",
            "userId": "u",
            "messages": [{"role": "user", "content": "x", "durable": "yes"}],
        },
        error=True,
    )
    assert refused["code"] == -32602 and "durable" in refused["message"]
