"""Summarizer-input sanitization and tool-output masking.

Both are *views*: stored raw turns keep their original text. The compactor feeds the
summarizer (and the prior-summary context) the sanitized projection only
.

Sanitization, in order:

1. Trim the text; normalise CRLF / CR line ends to LF.
2. Fenced blocks. A block opens on a line whose trimmed text starts with three or more
   backticks or tildes and closes on the next line whose trimmed text starts with a fence
   of the same character (or at end of text). A block whose bytes (fences included) are
   at least 240, or that has at least 8 inner lines, becomes :data:`FENCED_MARKER`.
   Smaller blocks are kept verbatim. (The reference only knew backtick fences.)
3. Data URIs. A line whose trimmed text starts with ``data:`` and is at least 64 bytes
   becomes :data:`TRANSPORT_MARKER`. In addition, and unlike the reference, an inline
   ``data:<mime>;base64,...`` URI of at least 64 bytes inside a longer line (for example
   a markdown image) is replaced in place by the marker, keeping the rest of the line.
4. Opaque blobs. A line of at least 96 bytes that contains a base64-like token of 80 or
   more characters from ``[A-Za-z0-9+/=_-]`` or a hex run of 64 or more characters (both
   word-bounded) becomes :data:`OPAQUE_MARKER`.
5. Runs of blank lines collapse to one blank line; the result is trimmed. An empty
   result becomes :data:`EMPTY_MARKER`.

Tool-output masking (observation masking, see compaction-research-notes): tool results
are not summarized. :func:`mask_tool_output` replaces a tool output with
``[tool output: N tokens, masked] <head>`` where ``N`` is :func:`estimate_tokens` of the
original and ``<head>`` is the first non-empty line, sanitized, whitespace-collapsed and
cut to 80 characters. Outputs of at most ``keep_tokens`` (default 24) tokens, and outputs
whose mask would not be strictly shorter, are kept verbatim: masking them saves nothing.
"""

from __future__ import annotations

import re

from sidecar.memory.core.tokens import estimate_tokens

FENCED_MARKER = "[sanitized fenced payload omitted for continuity]"
TRANSPORT_MARKER = "[sanitized transport payload omitted for continuity]"
OPAQUE_MARKER = "[sanitized opaque payload omitted for continuity]"
EMPTY_MARKER = "[sanitized continuity payload]"

FENCE_MIN_BYTES = 240
FENCE_MIN_INNER_LINES = 8
DATA_LINE_MIN_BYTES = 64
OPAQUE_LINE_MIN_BYTES = 96

TOOL_MASK_KEEP_TOKENS = 24
TOOL_MASK_HEAD_CHARS = 80

_FENCE_RE = re.compile(r"^(`{3,}|~{3,})")
_BASE64_RE = re.compile(r"\b[A-Za-z0-9+/=_-]{80,}\b", re.ASCII)
_HEX_RE = re.compile(r"\b[0-9A-Fa-f]{64,}\b", re.ASCII)
_INLINE_DATA_URI_RE = re.compile(r"data:[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+[^\s)\"'>]*", re.ASCII)
_BLANK_RUN_RE = re.compile(r"\n(?:[ \t]*\n)+")
_WS_RE = re.compile(r"\s+")


def _nbytes(s: str) -> int:
    return len(s.encode("utf-8"))


def _replace_fences(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    n = len(lines)
    while i < n:
        m = _FENCE_RE.match(lines[i].strip())
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        fence_char = m.group(1)[0]
        j = i + 1
        while j < n and not lines[j].strip().startswith(fence_char * 3):
            j += 1
        end = min(j, n - 1)  # index of the closing fence, or the last line at EOF
        block = lines[i : end + 1]
        inner = max(0, (j - i - 1) if j < n else (n - i - 1))
        size = _nbytes("\n".join(block))
        if size >= FENCE_MIN_BYTES or inner >= FENCE_MIN_INNER_LINES:
            out.append(FENCED_MARKER)
        else:
            out.extend(block)
        i = end + 1
    return out


def _sanitize_line(line: str) -> str:
    stripped = line.strip()
    if stripped.startswith("data:") and _nbytes(stripped) >= DATA_LINE_MIN_BYTES:
        return TRANSPORT_MARKER
    if "data:" in line:

        def _inline(m: re.Match[str]) -> str:
            return TRANSPORT_MARKER if _nbytes(m.group(0)) >= DATA_LINE_MIN_BYTES else m.group(0)

        line = _INLINE_DATA_URI_RE.sub(_inline, line)
    if _nbytes(line) >= OPAQUE_LINE_MIN_BYTES and (
        _BASE64_RE.search(line) is not None or _HEX_RE.search(line) is not None
    ):
        return OPAQUE_MARKER
    return line


def sanitize_for_summary(text: str) -> str:
    """The continuity-safe projection of ``text`` given to a summarizer (module doc)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        return EMPTY_MARKER
    lines = _replace_fences(text.split("\n"))
    lines = [ln if ln == FENCED_MARKER else _sanitize_line(ln) for ln in lines]
    out = _BLANK_RUN_RE.sub("\n\n", "\n".join(lines)).strip()
    return out or EMPTY_MARKER


def mask_tool_output(
    text: str,
    *,
    keep_tokens: int = TOOL_MASK_KEEP_TOKENS,
    head_chars: int = TOOL_MASK_HEAD_CHARS,
) -> str:
    """``[tool output: N tokens, masked] <head>`` for a tool result (module doc)."""
    tokens = estimate_tokens(text)
    if tokens <= keep_tokens:
        return text
    head = ""
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip():
            head = _WS_RE.sub(" ", sanitize_for_summary(line)).strip()
            break
    if len(head) > head_chars:
        head = head[: head_chars - 1].rstrip() + "…"
    masked = f"[tool output: {tokens} tokens, masked]"
    if head:
        masked = f"{masked} {head}"
    return masked if estimate_tokens(masked) < tokens else text


def is_tool_role(role: str) -> bool:
    """True for roles whose content is a tool result (``tool``, ``tool_result``, ``function``)."""
    return role.strip().lower() in {"tool", "tool_result", "function"}


def summary_view(text: str, role: str) -> str:
    """What a summarizer sees for one turn: masked when it is a tool output, else sanitized."""
    if is_tool_role(role):
        masked = mask_tool_output(text)
        if masked != text:
            return masked
    return sanitize_for_summary(text)
