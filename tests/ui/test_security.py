"""What a web page of another origin can do with the browser that is signed in to the UI:
nothing. It cannot read (Origin, Sec-Fetch-Site, CORS), it cannot write (Origin, CSRF
token), a rebound DNS name cannot reach it (Host), it cannot frame it; and the session token
is never in a logged URL. Driven from the real browser and from raw HTTP requests."""

from __future__ import annotations

import http.client
import re
from typing import Any

import pytest
from libravdb_client import Client
from selenium.webdriver.support.ui import WebDriverWait

from tests.ui import hostile
from tests.ui.conftest import RunningUi
from tests.ui.seed import FACTS, FACTS_SESSION, NS

WAIT_S = 30
# Another origin on another site (localhost is not 127.0.0.1's site), and another origin
# on the same site (another port of 127.0.0.1, whose requests carry the UI's cookie).
HOSTILE_HOSTS = ("localhost", "127.0.0.1")


def request(
    ui: RunningUi,
    method: str,
    path: str,
    *,
    body: str = "",
    headers: dict[str, str] | None = None,
    signed_in: bool = True,
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=60)
    sent = {"Host": f"127.0.0.1:{ui.port}", **(headers or {})}
    if signed_in:
        sent.setdefault("Cookie", f"libravdb_ui_{ui.port}={ui.token}")
    if body:
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=body.encode() if body else None, headers=sent)
    reply = conn.getresponse()
    text = reply.read().decode()
    conn.close()
    return reply.status, {k.lower(): v for k, v in reply.getheaders()}, text


def csrf_of(ui: RunningUi) -> str:
    status, _, page = request(ui, "GET", f"/memory?c=user:{NS}&id={FACTS_SESSION}:f4")
    assert status == 200, page
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def text_of(client: Client, record_id: str) -> str:
    return client.memory_get(f"user:{NS}", record_id, namespace=NS).record.text


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_page_of_another_origin_cannot_read_through_the_ui(
    browser: Any, ui: RunningUi, host: str
) -> None:
    def refusals() -> int:
        return sum(
            1
            for e in ui.events()
            if e.get("event") == "ui_request" and e["path"] == "/" and e["status"] == 403
        )

    before = refusals()
    with hostile.serving({"/read": hostile.reader(ui.base)}) as port:
        browser.get(f"http://{host}:{port}/read")
        outcome = WebDriverWait(browser, WAIT_S).until(
            lambda d: d.execute_script("return window.outcome")
        )
    assert outcome.startswith("blocked: "), outcome
    assert "Lisbon" not in outcome
    # the UI itself refused it (Sec-Fetch-Site), not only the browser's CORS check
    WebDriverWait(browser, WAIT_S).until(lambda _d: refusals() > before)


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
@pytest.mark.parametrize("action", ["/memory/update", "/forget"])
def test_a_page_of_another_origin_cannot_write_through_the_ui(
    browser: Any, ui: RunningUi, client: Client, host: str, action: str
) -> None:
    target = f"{FACTS_SESSION}:f3"
    before = text_of(client, target)
    fields = {
        "c": f"user:{NS}",
        "id": target,
        "text": "The attacker was here.",
        "r": f"user%3A{NS}/{FACTS_SESSION}%3Af3",
        "ns": NS,
        "csrf": "0" * 64,  # a guess: the real token is only in the UI's own pages
    }
    with hostile.serving({"/write": hostile.writer(ui.base, action, fields)}) as port:
        browser.get(f"http://{host}:{port}/write")
        WebDriverWait(browser, WAIT_S).until(lambda d: d.current_url.startswith(ui.base))
    assert "refused" in browser.page_source
    assert text_of(client, target) == before  # neither corrected nor forgotten


def test_the_ui_cannot_be_framed(browser: Any, ui: RunningUi) -> None:
    with hostile.serving({"/frame": hostile.framer(ui.base)}) as port:
        browser.get(f"http://localhost:{port}/frame")
        frame = browser.find_element("id", "ui")
        browser.switch_to.frame(frame)
        try:
            # The frame shows Chromium's blocked-page, never the UI.
            assert "Memories" not in browser.page_source
        finally:
            browser.switch_to.default_content()
    _, headers, _ = request(ui, "GET", "/")
    assert headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_a_rebound_dns_name_is_refused(ui: RunningUi) -> None:
    status, _, _ = request(ui, "GET", "/", headers={"Host": f"attacker.example:{ui.port}"})
    assert status == 421
    status, _, _ = request(ui, "GET", "/", headers={"Host": "127.0.0.1:1"})
    assert status == 421


def test_every_request_needs_the_session_token(ui: RunningUi) -> None:
    for path in ("/", "/sessions", "/overview", "/why", "/static/ui.js"):
        status, _, page = request(ui, "GET", path, signed_in=False)
        assert status == 401 and "session token" in page
    status, _, _ = request(ui, "GET", "/", headers={"Cookie": f"libravdb_ui_{ui.port}=wrong"})
    assert status == 401
    status, _, _ = request(ui, "GET", "/login?token=wrong", signed_in=False)
    assert status == 401
    status, headers, _ = request(ui, "GET", f"/login?token={ui.token}", signed_in=False)
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"libravdb_ui_{ui.port}={ui.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_writes_need_the_origin_and_the_csrf_token(ui: RunningUi, client: Client) -> None:
    target = f"{FACTS_SESSION}:f4"
    origin = {"Origin": ui.base}
    csrf = csrf_of(ui)
    form = f"c=user%3A{NS}&id={FACTS_SESSION}%3Af4&ns={NS}&text=I+work+at+Lumen+since+2024."
    refused = [
        ({}, f"{form}&csrf={csrf}"),  # no Origin
        ({"Origin": f"http://127.0.0.1:{ui.port + 1}"}, f"{form}&csrf={csrf}"),  # another port
        ({"Origin": "null"}, f"{form}&csrf={csrf}"),
        (origin, form),  # no CSRF token
        (origin, f"{form}&csrf={'0' * len(csrf)}"),  # a wrong one
    ]
    for headers, body in refused:
        status, _, _ = request(ui, "POST", "/memory/update", body=body, headers=headers)
        assert status == 403, (headers, body)
    assert text_of(client, target) == FACTS[4]
    # the same form with both is a write
    status, headers, _ = request(
        ui, "POST", "/memory/update", body=f"{form}&csrf={csrf}", headers=origin
    )
    assert status == 303 and "done=corrected" in headers["location"]
    assert text_of(client, target) == "I work at Lumen since 2024."
    status, _, _ = request(ui, "PUT", "/memory/update", body=f"{form}&csrf={csrf}", headers=origin)
    assert status == 405


def test_every_response_carries_the_security_headers(ui: RunningUi) -> None:
    for path in ("/", "/static/ui.css", "/nowhere"):
        _, headers, _ = request(ui, "GET", path)
        assert "default-src 'none'" in headers["content-security-policy"]
        assert headers["cache-control"] == "no-store"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"


def test_the_log_holds_no_token_no_query_and_no_memory_text(ui: RunningUi) -> None:
    query = "zebra crossing near the ferry"
    status, _, _ = request(ui, "GET", f"/login?token={ui.token}", signed_in=False)
    assert status in (302, 303)  # signed in: the token leaves the URL at once
    status, _, _ = request(ui, "GET", "/?q=" + query.replace(" ", "+"))
    assert status == 200
    paths = ui.request_paths("/", "/login")  # the request's line is in the log
    assert "/" in paths and "/login" in paths
    log = ui.log.read_text()
    assert ui.token not in log
    assert query not in log
    for fact in FACTS:
        assert fact not in log
    assert not [p for p in paths if "?" in p or "token" in p]
