"""Newline-delimited frames with a size cap that never poisons the connection.

A line longer than the cap is consumed up to its newline and reported as
``OVERSIZED``; the next line is read normally.
"""

from __future__ import annotations

import asyncio
from typing import Final


class _Oversized:
    def __repr__(self) -> str:
        return "OVERSIZED"


OVERSIZED: Final = _Oversized()
Frame = bytes | _Oversized


def stream_limit(max_frame_bytes: int) -> int:
    """The StreamReader buffer limit to use for a given frame cap (newline included)."""
    return max_frame_bytes + 1


class FrameReader:
    def __init__(self, reader: asyncio.StreamReader, max_frame_bytes: int) -> None:
        self._reader = reader
        self._max = max_frame_bytes

    async def next(self) -> Frame | None:
        """The next non-blank line without its newline, OVERSIZED, or None at end of stream."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial  # a last line without newline still counts
                if not line.strip():
                    return None
            except asyncio.LimitOverrunError as exc:
                await self._discard_line(exc.consumed)
                return OVERSIZED
            if len(line.rstrip(b"\r\n")) > self._max:
                return OVERSIZED
            if line.strip():
                return line

    async def _discard_line(self, consumed: int) -> None:
        # Drop buffered bytes until the newline that ends the oversized line (or EOF).
        while True:
            if consumed:
                await self._reader.readexactly(consumed)
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed
