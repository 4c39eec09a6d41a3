"""The memory the UI tests browse: two namespaces, a compacted session with a two-level
summary DAG, dated facts over several months, an authored core document. Written through
the daemon's own RPCs (real embeddings, real gate, real compaction)."""

from __future__ import annotations

from libravdb_client import Client

NS = "alice"
OTHER_NS = "bob"
FACTS_SESSION = "daily-chat"
LONG_SESSION = "trip-planning"
DAY_MS = 86_400_000
# 2026-01-05 00:00 UTC: the facts are said over the months after it.
T0 = 1_767_571_200_000

FACTS = [
    "I moved to Lisbon in May.",
    "My sister Ana is a nurse in Porto.",
    "I'm allergic to peanuts, so please never suggest satay.",
    "Our daughter Mia starts school in September.",
    "I work as a data engineer at Lumen.",
    "The cat's name is Miso and she is three years old.",
    "I run 10 km every Sunday along the river.",
    "My favourite book is The Left Hand of Darkness.",
]
TOPICS = [
    "the flights to Kyoto",
    "a ryokan near the Philosopher's Path",
    "the rail pass",
    "packing for a rainy week",
    "the tea ceremony booking",
    "day trips to Nara",
    "the budget in yen",
    "vegetarian restaurants",
    "the temple opening hours",
    "travel insurance",
    "the airport train",
    "souvenirs for Ana",
]
SECRET = "Bob's bank PIN hint is the lighthouse."
RULES = """---
core: true
---
# House rules

- Always answer in British English.
- Never book anything without asking first.

> Prefer trains to planes where the trip takes under five hours.
"""


def seed(client: Client) -> dict[str, object]:
    facts = []
    for i, text in enumerate(FACTS):
        ts = T0 + i * 21 * DAY_MS
        facts.append({"id": f"f{i}", "role": "user", "content": text, "ts": ts})
        facts.append(
            {
                "id": f"r{i}",
                "role": "assistant",
                "content": "Thanks, I'll remember that.",
                "ts": ts + 60_000,
            }
        )
    client.ingest(FACTS_SESSION, facts, namespace=NS)
    long = []
    for i in range(48):
        topic = TOPICS[i // 4]
        ts = T0 + 200 * DAY_MS + i * 3 * 3_600_000
        if i % 2 == 0:
            text = f"Can you look into {topic}? Detail {i}: I'd like options by Friday."
        else:
            text = f"Here is what I found about {topic} (note {i}): three options, prices attached."
        long.append(
            {
                "id": f"t{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "ts": ts,
            }
        )
    client.ingest(LONG_SESSION, long, namespace=NS)
    compacted = client.compact(LONG_SESSION, target_size=4)
    client.ingest("bob-1", [{"id": "b0", "role": "user", "content": SECRET}], namespace=OTHER_NS)
    client.authored_ingest("house-rules.md", RULES, core=True)
    return {"summaries": compacted.summary_ids}
