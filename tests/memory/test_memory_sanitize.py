from __future__ import annotations

import base64

from sidecar.memory.compaction.sanitize import (
    EMPTY_MARKER,
    FENCED_MARKER,
    OPAQUE_MARKER,
    TRANSPORT_MARKER,
    mask_tool_output,
    sanitize_for_summary,
    summary_view,
)
from sidecar.memory.core.tokens import estimate_tokens


def test_large_fence_replaced_small_kept() -> None:
    big = "intro\n```python\n" + "x = 1\n" * 9 + "```\noutro"
    assert sanitize_for_summary(big) == f"intro\n{FENCED_MARKER}\noutro"
    wide = "```\n" + "y" * 250 + "\n```"
    assert sanitize_for_summary(wide) == FENCED_MARKER
    small = "see\n```\nls -la\n```\ndone"
    assert sanitize_for_summary(small) == small


def test_unclosed_fence_runs_to_eof_and_tilde_fences() -> None:
    text = "before\n~~~\n" + "line\n" * 10
    assert sanitize_for_summary(text) == f"before\n{FENCED_MARKER}"
    unclosed = "a\n```\n" + "z\n" * 8
    assert sanitize_for_summary(unclosed) == f"a\n{FENCED_MARKER}"


def test_data_uri_lines_and_inline() -> None:
    payload = base64.b64encode(b"\x00" * 60).decode()
    line = f"data:image/png;base64,{payload}"
    assert sanitize_for_summary(f"look\n{line}\nok") == f"look\n{TRANSPORT_MARKER}\nok"
    inline = f"![img]({line}) is the chart"
    assert sanitize_for_summary(inline) == f"![img]({TRANSPORT_MARKER}) is the chart"
    assert sanitize_for_summary("data: short") == "data: short"


def test_opaque_blobs() -> None:
    blob = "A1b2" * 25
    assert sanitize_for_summary(f"token {blob} end") == OPAQUE_MARKER
    hexrun = "deadbeef" * 9
    assert sanitize_for_summary(f"sha {hexrun} trailing words to pass ninety-six bytes") == (
        OPAQUE_MARKER
    )
    assert sanitize_for_summary("short " + "ab" * 10) == "short " + "ab" * 10


def test_blank_lines_collapse_and_empty() -> None:
    assert sanitize_for_summary("a\n\n\n\n b\r\n\r\n\r\nc") == "a\n\n b\n\nc"
    assert sanitize_for_summary("   \n\n ") == EMPTY_MARKER


def test_tool_output_masking() -> None:
    out = "Result: 200 rows\n" + "row data here\n" * 50
    masked = mask_tool_output(out)
    assert masked.startswith(f"[tool output: {estimate_tokens(out)} tokens, masked] Result: 200")
    assert estimate_tokens(masked) < estimate_tokens(out)
    assert mask_tool_output("ok") == "ok"
    assert summary_view(out, "tool") == masked
    assert summary_view("short tool text", "tool") == "short tool text"
    assert summary_view(out, "user") == sanitize_for_summary(out)
    long_head = "x" * 500
    assert len(mask_tool_output(long_head).split("] ", 1)[1]) <= 80
