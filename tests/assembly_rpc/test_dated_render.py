"""Recalled entries carry their date (v2 default), the reference bytes stay available,
and assemble can return the selected items' text for hosts that render themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sidecar.assembly.render import entry_date, injected_message_content, render_sections
from sidecar.assembly.selection import SelectedItem
from tests.memory_rpc.conftest import make_harness

MAY_8_2023 = 1_683_554_160_000  # 2023-05-08 13:56 UTC


def _item(text: str, ts: int | None, part: str = "retrieval") -> SelectedItem:
    return SelectedItem(
        part=part, kind="turn", collection="turns:u", id=text, text=text, role="user", ts=ts
    )


@pytest.mark.sqlite_only("no store: rendering alone")
def test_recalled_entries_are_grouped_by_day() -> None:
    assert entry_date(MAY_8_2023) == "2023-05-08"
    assert entry_date(None) == "" and entry_date(0) == ""
    day = 86_400_000
    items = [
        _item("later", MAY_8_2023 + 3 * day),
        _item("note", None),
        _item("first a", MAY_8_2023),
        _item("first b", MAY_8_2023 + 60_000),
        _item("tail turn", MAY_8_2023, part="tail"),
    ]
    dated = render_sections(items, dated=True)
    recalled = dated.split("<recalled_memories>")[1].splitlines()
    body = [x for x in recalled if x.startswith("[")]
    assert body == [
        '[M1] <entry role="user" source="recalled">note</entry>',
        "[2023-05-08]",
        '[M2] <entry role="user" source="recalled">first a</entry>',
        '[M3] <entry role="user" source="recalled">first b</entry>',
        "[2023-05-11]",
        '[M4] <entry role="user" source="recalled">later</entry>',
    ]
    assert "[2023-05-08]" not in dated.split("<recalled_memories>")[0]  # not in the tail
    plain = render_sections(items)
    assert "[2023-" not in plain  # the reference's bytes
    assert injected_message_content(items[0], dated=True).startswith("[2023-05-11]\n<entry")


async def test_assemble_dates_recalled_entries(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        rpc = h.call
        msgs = [
            {
                "id": "p1",
                "role": "user",
                "content": "I adopted a cat named Miso.",
                "ts": MAY_8_2023,
            },
            {
                "id": "p2",
                "role": "assistant",
                "content": "Miso is a lovely name.",
                "ts": MAY_8_2023 + 1,
            },
        ]
        await rpc("ingest", {"sessionId": "old", "userId": "u", "messages": msgs})
        base = {
            "sessionId": "new",
            "userId": "u",
            "prompt": "When did I adopt Miso the cat?",
            "tokenBudget": 4000,
        }
        dated = await rpc("assemble", base)
        text = dated["systemPromptAddition"]
        assert re.search(
            r"\[2023-05-08\]\n\[M\d+\] <entry role=\"user\" source=\"recalled\">I adopted", text
        )
        ref = await rpc("assemble", {**base, "render": "reference"})
        assert "[2023-05-08]" not in ref["systemPromptAddition"]
        assert (
            '<entry role="user" source="recalled">I adopted a cat named Miso.</entry>'
            in ref["systemPromptAddition"]
        )
        assert dated["budget"]["used"] <= dated["budget"]["total"]
        assert all("text" not in s for s in dated["selected"])
        with_text = await rpc("assemble", {**base, "itemText": True})
        texts = {s["id"]: s.get("text") for s in with_text["selected"]}
        assert "I adopted a cat named Miso." in texts.values()
        e = await rpc("assemble", {**base, "render": "fancy"}, error=True)
        assert e["code"] == -32602
    finally:
        await close()
