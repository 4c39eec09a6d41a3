"""Argument errors as a model reads them.

The SDK reports a tool argument that fails its schema with pydantic's text: ``1 validation
error for search_memoryArguments`` (an internal class name), the rejected input echoed,
and ``For further information visit https://errors.pydantic.dev/...`` under each error, a
link that tells a model nothing about its call. :func:`argument_error` says the same
thing in one line per field: ``invalid arguments: k: Input should be less than or equal
to 50``.
"""

from __future__ import annotations

from pydantic import ValidationError


def argument_error(tool: str, exc: ValidationError) -> str:
    """``Error executing tool TOOL: invalid arguments: FIELD: MESSAGE; ...`` (the SDK's
    prefix kept, so every tool error of the server starts alike)."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"Error executing tool {tool}: invalid arguments: {'; '.join(problems)}"
