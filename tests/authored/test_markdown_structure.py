"""The issue's handbook through authored.ingest and assemble: front matter and headings
shape the rules, they are never injected or recalled as rules or memories themselves."""

from __future__ import annotations

from tests.authored.conftest import Rpc

HANDBOOK = """---
title: Team handbook
core: true
tags: [team]
---
# Rules

- Never push to main. #git

## Deploys

We deploy from the release branch on Tuesdays.
"""


async def test_front_matter_and_headings_never_reach_the_prompt(rpc: Rpc) -> None:
    res = await rpc("authored.ingest", {"sourceDoc": "handbook.md", "text": HANDBOOK})
    assert (res["core"], res["hard"], res["soft"], res["variant"]) == (True, 1, 0, 1)
    out = await rpc(
        "assemble",
        {
            "sessionId": "s1",
            "userId": "u",
            "prompt": "What are the team rules and when do we deploy?",
            "tokenBudget": 4000,
        },
    )
    addition = out["systemPromptAddition"]
    assert "[A1] Never push to main. #git" in addition
    assert "title:" not in addition and "core: true" not in addition
    assert "[A2]" not in addition  # the front matter was node 0 and a second hard rule
    recalled = [s for s in out["selected"] if s["collection"] == "authored:variant"]
    texts = {r["text"] for r in await rpc.listing("authored:variant")}
    assert texts == {"We deploy from the release branch on Tuesdays."}
    assert all(s["id"] == "handbook.md#000001" for s in recalled)
    hard = (await rpc.listing("authored:hard"))[0]["metadata"]
    assert hard["headings"] == ["Rules"] and hard["title"] == "Team handbook"
    assert hard["tags"] == ["team", "git"]
