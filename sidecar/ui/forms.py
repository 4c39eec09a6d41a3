"""Reading a POSTed form: bounded, and only with this session's CSRF token."""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request

from sidecar.ui.context import PageError, UiContext
from sidecar.ui.security import check_csrf

# A correction's text is the largest field a form sends; a megabyte is far above it.
MAX_FORM_BYTES = 1 << 20


async def read_form(request: Request, ctx: UiContext) -> dict[str, list[str]]:
    declared = request.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) > MAX_FORM_BYTES:
        raise PageError(413, "the form is too large")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise PageError(413, "the form is too large")
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    if not check_csrf(ctx.guard, form):
        raise PageError(
            403,
            "this form did not come from a page of this session (its CSRF token is missing "
            "or wrong); reload the page and send it again",
        )
    return form


def field(form: dict[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0]


async def read_post(request: Request) -> tuple[UiContext, dict[str, list[str]], str]:
    """A form's POST: the UI's context, the form (size and CSRF token checked) and the
    namespace it acts in."""
    ctx: UiContext = request.app.state.ui
    form = await read_form(request, ctx)
    return ctx, form, ctx.namespace(request, form)
