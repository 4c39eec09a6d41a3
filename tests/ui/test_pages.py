"""The four pages in a real headless Chromium against a real daemon with the real model:
search, filters and paging, correcting a memory, forgetting with its dry run, expanding a
summary, the Why page, the charts; the keyboard and a narrow window."""

from __future__ import annotations

from typing import Any

import pytest
from libravdb_client import Client, NotFound
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.ui.conftest import RunningUi, screenshot
from tests.ui.seed import FACTS, FACTS_SESSION, LONG_SESSION, NS, SECRET

WAIT_S = 30


def wait(driver: Any) -> WebDriverWait:
    return WebDriverWait(driver, WAIT_S)


def texts(driver: Any, selector: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]


def facts_of(item: Any) -> dict[str, str]:
    """A memory's facts line (``dl.facts``) as {term: value}."""
    terms = item.find_elements(By.CSS_SELECTOR, "dl.facts dt")
    values = item.find_elements(By.CSS_SELECTOR, "dl.facts dd")
    return {t.text: v.text for t, v in zip(terms, values, strict=True)}


def open_page(driver: Any, ui: RunningUi, path: str) -> None:
    driver.get(ui.base + path)
    wait(driver).until(EC.presence_of_element_located((By.ID, "main")))


def test_sign_in_leaves_no_token_in_the_address(browser: Any, ui: RunningUi) -> None:
    assert ui.url.startswith("http://127.0.0.1:") and "/login?token=" in ui.url
    open_page(browser, ui, "/")
    assert ui.token not in browser.current_url
    assert browser.title == "Memories · libravdb"


def test_search_shows_each_memory_with_why_it_was_kept(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/")
    box = browser.find_element(By.ID, "q")
    box.send_keys("Where do I live?", Keys.ENTER)
    wait(browser).until(EC.url_contains("q=Where"))
    items = browser.find_elements(By.CSS_SELECTOR, "li.mem")
    assert items, browser.page_source
    assert items[0].find_element(By.CSS_SELECTOR, "p.text").text == "I moved to Lisbon in May."
    facts = facts_of(items[0])
    assert facts["kept"].startswith("durable: gate score ")
    assert facts["session"] == FACTS_SESSION
    assert facts["said"] == "2026-01-05 00:00 UTC"
    assert facts["scope"] == f"history turns:{NS}"
    screenshot(browser, "search")
    # another namespace's memory never shows, whatever the query
    box = browser.find_element(By.ID, "q")
    box.clear()
    box.send_keys("bank PIN hint lighthouse", Keys.ENTER)
    wait(browser).until(EC.url_contains("lighthouse"))
    assert SECRET not in browser.page_source


def test_filters_by_scope_session_and_time_range(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/")
    Select(browser.find_element(By.ID, "scope")).select_by_value("history")
    browser.find_element(By.ID, "session").send_keys(FACTS_SESSION)
    # the first three weeks of January: the first two facts and their replies
    browser.execute_script(
        "document.getElementById('since').value = '2026-01-01';"
        "document.getElementById('until').value = '2026-01-31';"
    )
    browser.find_element(By.CSS_SELECTOR, ".filters button[type=submit]").click()
    wait(browser).until(EC.url_contains("scope=history"))
    shown = texts(browser, "li.mem p.text")
    assert sorted(shown) == sorted([FACTS[0], FACTS[1], *["Thanks, I'll remember that."] * 2])
    assert "1\u20134 of 4" in browser.find_element(By.CSS_SELECTOR, ".pager").text


def test_large_lists_are_paged(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/?scope=history")
    pager = browser.find_element(By.CSS_SELECTOR, ".pager")
    assert pager.text.startswith("1\u201350 of ")
    first_page = set(texts(browser, "li.mem p.text"))
    pager.find_element(By.LINK_TEXT, "Next page").click()
    wait(browser).until(EC.url_contains("cursor="))
    second = browser.find_element(By.CSS_SELECTOR, ".pager").text
    assert second.startswith("51\u2013")
    # the replies repeat one text; every other text is on one page only
    repeated = {"Thanks, I'll remember that."}
    assert not (first_page - repeated) & set(texts(browser, "li.mem p.text"))


def _open_memory(browser: Any, ui: RunningUi, text: str) -> None:
    open_page(browser, ui, f"/?scope=durable&session={FACTS_SESSION}")
    item = next(e for e in browser.find_elements(By.CSS_SELECTOR, "li.mem") if text in e.text)
    item.find_element(By.LINK_TEXT, "Correct").click()
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "form.correct")))


def test_correct_a_memory_and_see_its_earlier_versions(
    browser: Any, ui: RunningUi, client: Client
) -> None:
    old = "My favourite book is The Left Hand of Darkness."
    new = "My favourite book is The Dispossessed."
    _open_memory(browser, ui, old)
    area = browser.find_element(By.ID, "text")
    area.clear()
    area.send_keys(new)
    browser.find_element(By.CSS_SELECTOR, "form.correct button").click()
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".flash")))
    assert browser.find_element(By.CSS_SELECTOR, "blockquote.text").text == new
    versions = texts(browser, "ol.versions li p.text")
    assert versions == [new, old]
    screenshot(browser, "correct")
    # the list read before the correction was kept by the UI; the write dropped it
    open_page(browser, ui, f"/?scope=durable&session={FACTS_SESSION}")
    shown = texts(browser, "li.mem p.text")
    assert new in shown and old not in shown
    # the daemon holds the correction, and the old text as version 1
    record_id = f"{FACTS_SESSION}:f7"
    assert client.memory_get(f"user:{NS}", record_id, namespace=NS).record.text == new
    earlier = client.memory_get(f"user:{NS}", f"{record_id}~v1", namespace=NS).record
    assert (earlier.text, earlier.metadata["superseded_by"]) == (old, record_id)


def test_forget_a_selection_after_its_dry_run(browser: Any, ui: RunningUi, client: Client) -> None:
    chosen = [FACTS[5], FACTS[6]]  # the cat, the Sunday run
    open_page(browser, ui, f"/?scope=durable&session={FACTS_SESSION}")
    for item in browser.find_elements(By.CSS_SELECTOR, "li.mem"):
        if any(text in item.text for text in chosen):
            item.find_element(By.CSS_SELECTOR, "input.pick").click()
    button = browser.find_element(By.ID, "forget-selected")
    assert button.text == "Forget 2 selected…"
    button.click()
    wait(browser).until(EC.title_contains("Forget: what goes"))
    assert sorted(texts(browser, "ol.forget-list p.text")) == sorted(chosen)
    assert "nothing has changed yet" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    screenshot(browser, "forget")
    ids = [f"{FACTS_SESSION}:f5", f"{FACTS_SESSION}:f6"]
    for record_id in ids:  # the dry run changed nothing
        client.memory_get(f"user:{NS}", record_id, namespace=NS)
    browser.find_element(By.ID, "confirm-forget").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "forgotten")))
    assert browser.find_element(By.ID, "forgotten").text.startswith("Forgotten: 2 memories")
    for record_id in ids:
        for collection in (f"user:{NS}", f"turns:{NS}"):
            with pytest.raises(NotFound):
                client.memory_get(collection, record_id, namespace=NS)
    open_page(browser, ui, f"/?scope=durable&session={FACTS_SESSION}")
    assert not set(chosen) & set(texts(browser, "li.mem p.text"))


def test_a_session_timeline_with_its_summary_dag(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, f"/sessions/{LONG_SESSION}")
    turns = texts(browser, "ol.timeline li.turn p.text")
    assert len(turns) == 48
    assert turns[0].startswith("Can you look into the flights to Kyoto? Detail 0")
    roots = browser.find_elements(By.CSS_SELECTOR, "ul.dag > li > details.sum")
    assert roots and all("L2" in r.find_element(By.TAG_NAME, "summary").text for r in roots)
    # open the oldest top-level summary: its children are level-1 summaries
    roots[0].find_element(By.TAG_NAME, "summary").click()
    children = wait(browser).until(
        lambda d: roots[0].find_elements(By.CSS_SELECTOR, ".kids-list > li > details.sum")
    )
    # open the first of them: the turns it covers, in the order said
    children[0].find_element(By.TAG_NAME, "summary").click()
    turn_links = wait(browser).until(
        lambda d: children[0].find_elements(By.CSS_SELECTOR, ".kids-list .kid-turn a")
    )
    covered = [a.text for a in turn_links]
    assert covered and covered[0] == turns[0]
    assert all(text in turns for text in covered)
    screenshot(browser, "session")


def test_sessions_list(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/sessions")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr")
    sessions = [r.find_element(By.TAG_NAME, "th").text for r in rows]
    assert sessions == [LONG_SESSION, FACTS_SESSION]  # most recently active first
    assert rows[0].find_elements(By.TAG_NAME, "td")[0].text == "48"
    screenshot(browser, "sessions")
    # the list is kept by the UI for a while; Refresh asks the daemon again
    assert browser.find_element(By.CSS_SELECTOR, ".asof").text.startswith("as of ")
    browser.find_element(By.LINK_TEXT, "Refresh").click()
    wait(browser).until(EC.url_contains("fresh=1"))
    assert [
        r.find_element(By.TAG_NAME, "th").text
        for r in browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr")
    ] == sessions


def test_why_shows_what_was_selected_and_what_was_left_out(browser: Any, ui: RunningUi) -> None:
    # from the session the odd answer was given in (the facts are another session's)
    open_page(browser, ui, f"/sessions/{LONG_SESSION}")
    browser.find_element(By.LINK_TEXT, "Ask Why in this session").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "prompt")))
    assert browser.find_element(By.ID, "session").get_attribute("value") == LONG_SESSION
    browser.find_element(By.ID, "prompt").send_keys("Which foods must I avoid?")
    budget = browser.find_element(By.ID, "budget")
    budget.clear()
    budget.send_keys("2000")
    browser.find_element(By.CSS_SELECTOR, "form.why button").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "addition")))
    selected = browser.find_elements(By.CSS_SELECTOR, "table.selected tbody tr")
    # each item with why it is there: its section and the parts of its score
    reasons = {
        r.find_elements(By.TAG_NAME, "td")[2].text.split("\n")[0]: r.find_elements(
            By.TAG_NAME, "td"
        )[5].text
        for r in selected
    }
    assert all(reasons.values()), reasons
    assert "hard rule" in reasons["Always answer in British English."]
    assert FACTS[2] in reasons  # the peanuts, recalled from the other session
    left_out = browser.find_elements(By.CSS_SELECTOR, "table.considered tbody tr")
    assert left_out
    for row in left_out:
        assert row.find_element(By.CSS_SELECTOR, "td.why").text
        assert row.find_elements(By.TAG_NAME, "td")[4].text
    # a ranked candidate's score in its parts: dense, lexical, context
    parts = {b.text for b in browser.find_elements(By.CSS_SELECTOR, "table.considered .part b")}
    assert {"dense", "bm25", "ctx"} <= parts
    assert "peanuts" in browser.find_element(By.CSS_SELECTOR, "pre.prompt").text
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.stacked rect.bar")
    assert bars and all(float(b.get_attribute("width")) > 0 for b in bars)
    screenshot(browser, "why")


def _rendered_heights(driver: Any, selector: str) -> list[float]:
    return list(
        driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]))"
            ".map(e => e.getBoundingClientRect().height)",
            selector,
        )
    )


def test_overview_charts_render(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/overview")
    months = browser.find_elements(By.CSS_SELECTOR, "#timeline svg rect.bar")
    assert len(months) >= 6  # January to the month of the compaction, one bar each
    assert max(_rendered_heights(browser, "#timeline svg rect.bar")) > 50
    scopes = _rendered_heights(browser, "#scopes svg rect.bar")
    assert len(scopes) == 6 and all(h > 0 for h in scopes)
    levels = browser.find_elements(By.CSS_SELECTOR, "#levels svg rect.bar title")
    assert [t.get_attribute("textContent").split(":")[0] for t in levels] == ["level 1", "level 2"]
    authored = browser.find_element(By.ID, "authored").text
    assert "hard: 2 rule(s) from 1 document(s)" in authored and "house-rules.md" in authored
    daemon = browser.find_element(By.ID, "daemon").text
    assert "healthy" in daemon and "all-minilm-l6-v2" in daemon
    assert "on disk" in browser.find_element(By.ID, "store").text
    screenshot(browser, "overview")
    # the bucket applies at once (ui.js submits the select)
    Select(browser.find_element(By.ID, "bucket")).select_by_value("week")
    wait(browser).until(EC.url_contains("bucket=week"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline svg rect.bar")) > len(months)


def test_keyboard_and_a_narrow_window(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("/")
    assert browser.switch_to.active_element.get_attribute("id") == "q"
    # the first Tab stop is the skip link, which leads to the main content
    open_page(browser, ui, "/sessions")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    skip = browser.switch_to.active_element
    assert skip.text == "Skip to content"
    skip.send_keys(Keys.ENTER)
    assert browser.switch_to.active_element.get_attribute("id") == "main"
    browser.set_window_size(400, 900)
    try:
        for path in ("/", "/sessions", f"/sessions/{LONG_SESSION}", "/why", "/overview"):
            open_page(browser, ui, path)
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at 400px"
        screenshot(browser, "narrow")
    finally:
        browser.set_window_size(1280, 900)


def test_other_namespaces_are_refused(browser: Any, ui: RunningUi) -> None:
    open_page(browser, ui, "/?ns=bob")
    assert (
        "this UI serves the namespace(s) alice"
        in browser.find_element(By.CSS_SELECTOR, ".error").text
    )
    open_page(browser, ui, "/sessions/bob-1")
    assert browser.find_elements(By.CSS_SELECTOR, ".error")
    assert SECRET not in browser.page_source
