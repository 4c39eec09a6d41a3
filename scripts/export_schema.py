#!/usr/bin/env python3
"""Write the JSON Schema of every protocol method to protocol/schema/.

`protocol/schema/libravdb.schema.json` holds every params/result type under
`$defs` and a `methods` table naming each method's params and result. Run with
`--check` to fail (exit 1) when the checked-in file is out of date.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from protocol.catalog import all_methods  # noqa: E402
from protocol.jsonrpc import ErrorObject, ErrorResponse, ProgressParams, Request, SuccessResponse  # noqa: E402

SCHEMA_PATH = REPO / "protocol" / "schema" / "libravdb.schema.json"


def build_schema() -> dict[str, Any]:
    methods = all_methods()
    types: list[Any] = [Request, SuccessResponse, ErrorResponse, ErrorObject, ProgressParams]
    for schema in methods.values():
        if schema.params is not None:
            types.append(schema.params)
        types.append(schema.result)
    by_name: dict[str, Any] = {}
    for kind in types:
        other = by_name.setdefault(kind.__name__, kind)
        if other is not kind:
            raise SystemExit(
                f"two wire types are named {kind.__name__}: {other.__module__} and "
                f"{kind.__module__}; rename one so the schema stays unambiguous"
            )
    refs, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    ref_of = dict(zip(map(id, types), refs, strict=True))
    table = {}
    for name in sorted(methods):
        schema = methods[name]
        table[name] = {
            "summary": schema.summary,
            "params": ref_of[id(schema.params)] if schema.params is not None else None,
            "result": ref_of[id(schema.result)],
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "libravdbd JSON-RPC protocol",
        "methods": table,
        "$defs": dict(sorted(components.items())),
    }


def render() -> str:
    return json.dumps(build_schema(), indent=2, sort_keys=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = SCHEMA_PATH.read_text() if SCHEMA_PATH.exists() else ""
        if current != text:
            print(f"{SCHEMA_PATH} is out of date: run `make schema`", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH.relative_to(REPO)} ({len(build_schema()['methods'])} methods)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
