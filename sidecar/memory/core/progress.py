"""How long operations report how far they are (the caller's ``$/progress``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

# progress(done, total, message): awaited by the operation between its steps.
Progress = Callable[[int, int | None, str | None], Awaitable[None]]

# Embedding batches reported one by one: one progress step per this many texts.
PROGRESS_CHUNK = 64


async def no_progress(done: int, total: int | None, message: str | None) -> None:
    return None
