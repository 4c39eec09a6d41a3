"""A web server for pages of another origin: what a site the user visits could serve to
the browser that is signed in to the UI."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(pages: dict[str, str]) -> Iterator[int]:
    """Serve ``pages`` ({path: html}) on 127.0.0.1 (any free port); yields the port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path.split("?")[0], "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def reader(ui_base: str) -> str:
    """Tries to read a search through the UI, with the browser's cookies."""
    return f"""<!doctype html><title>hostile reader</title><script>
window.outcome = null;
fetch("{ui_base}/?q=Lisbon", {{credentials: "include"}})
  .then(r => r.text()).then(t => window.outcome = "read: " + t)
  .catch(e => window.outcome = "blocked: " + e);
</script>"""


def writer(ui_base: str, action: str, fields: dict[str, str]) -> str:
    """Posts a form to the UI as soon as it loads (a cross-site request forgery)."""
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
    return f"""<!doctype html><title>hostile writer</title>
<form id="f" method="post" action="{ui_base}{action}">{inputs}</form>
<script>document.getElementById("f").submit();</script>"""


def framer(ui_base: str) -> str:
    """Frames the UI (clickjacking) and reports whether the frame's page arrived."""
    return f"""<!doctype html><title>hostile framer</title>
<iframe id="ui" src="{ui_base}/"></iframe>"""
