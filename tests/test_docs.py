"""The docs stand alone and the quickstart's example prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import REPO, daemon_env

DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
OUTSIDE = re.compile(r"§\s*\d|\.\./shared|host-behaviour|continuity\.md|libravdbd-contract\.md")


def test_docs_cite_nothing_outside_the_repository() -> None:
    cited = [
        f"{path.name}:{n}: {line.strip()}"
        for path in DOCS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert cited == []


def test_readme_links_the_quickstart_first() -> None:
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and links[0] == "docs/quickstart.md"


def _blocks(page: str, lang: str) -> list[str]:
    """The fenced blocks of ``page`` tagged ``lang`` ("" for untagged), in order."""
    blocks: list[str] = []
    current: list[str] | None = None
    tag = ""
    for line in page.splitlines():
        if line.startswith("```"):
            if current is None:
                current, tag = [], line[3:].strip()
            else:
                if tag == lang:
                    blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_quickstart_example_matches_the_page_and_its_output(tmp_path: Path) -> None:
    page = (REPO / "docs" / "quickstart.md").read_text()
    example = REPO / "docs" / "examples" / "quickstart.py"
    source = example.read_text()
    shown_code = next(b for b in _blocks(page, "python") if "def turn(" in b)
    body = source.split('"""', 2)[2].replace("from __future__ import annotations\n\n", "")
    assert shown_code.strip() == body.strip()
    done = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=daemon_env(tmp_path / "home"),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    shown_output = next(b for b in _blocks(page, "") if b.startswith("--- monday"))
    assert done.stdout.strip() == shown_output.strip()
