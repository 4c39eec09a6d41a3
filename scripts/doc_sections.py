"""The marked sections of docs/benchmarks.md that each measuring script rewrites.

A section is the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``;
replacing it leaves the rest of the file (other scripts' figures, prose) untouched. A
section not yet in the file is appended under its heading.
"""

from __future__ import annotations

from pathlib import Path


def replace_section(doc: str, name: str, body: str, heading: str) -> str:
    """``doc`` with section ``name`` holding ``body`` (appended under ``## heading`` when
    the markers are missing)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body.rstrip(chr(10))}\n{end}"
    head, marker, rest = doc.partition(start)
    if marker and end in rest:
        return head + block + rest.split(end, 1)[1]
    return doc.rstrip() + f"\n\n## {heading}\n\n{block}\n"


def write_section(path: Path, name: str, body: str, heading: str) -> None:
    """:func:`replace_section` applied to the file at ``path`` (created when missing)."""
    doc = path.read_text() if path.exists() else "# Benchmarks\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(replace_section(doc, name, body, heading))
