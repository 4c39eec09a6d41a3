"""The host loop of docs/quickstart.md, runnable: python docs/examples/quickstart.py

Starts a private daemon over stdio with a throwaway data directory, then plays two
conversations of one user the way an agent host would.
"""

from __future__ import annotations

import tempfile

from libravdb_client import Client

USER = "dana"  # who the memories belong to: the namespace
# When each conversation happened (epoch ms): recalled memories are shown under their day.
DAY = {"monday": 1_795_424_400_000, "friday": 1_795_770_000_000}  # 2026-11-23 and 27


def turn(client: Client, session: str, history: list[dict[str, object]], prompt: str) -> str:
    """One host turn: memory for the model call, then the new messages are stored."""
    ctx = client.assemble(
        session,
        user_id=USER,
        prompt=prompt,
        messages=history,  # what the host sends the model anyway
        token_budget=4000,  # the model's context budget; memory gets 25 % of it
    )
    print(f"--- {session}: {prompt!r}")
    print(
        f"memory budget {ctx.budget.total}, used {ctx.budget.used}; "
        f"estimatedTokens {ctx.estimated_tokens}"
    )
    print(ctx.system_prompt_addition or "(no memory added)")
    reply = "Noted."  # here the host calls its model with ctx.messages + the addition
    ts = DAY[session] + 1000 * len(history)
    new = [
        {"role": "user", "content": prompt, "ts": ts},
        {"role": "assistant", "content": reply, "ts": ts + 1},
    ]
    client.ingest(session, new, user_id=USER)
    history.extend(new)
    return reply


def main() -> None:
    with tempfile.TemporaryDirectory() as data, Client.spawn(data_dir=data, stderr=-3) as client:
        history: list[dict[str, object]] = []
        turn(
            client,
            "monday",
            history,
            "I'm allergic to peanuts, so never suggest recipes with them.",
        )
        turn(client, "monday", history, "My sister Ana moved to Porto last spring.")
        # A new conversation days later: no history is passed, memory fills the gap.
        turn(client, "friday", [], "Can you suggest a dessert for Ana's visit?")
        hits = client.search("sister", user_id=USER)
        print("--- search 'sister':", [h.text for h in hits.hits])
        print("--- forget:", client.forget(user_id=USER, include_sessions=True).deleted, "records")


if __name__ == "__main__":
    main()
