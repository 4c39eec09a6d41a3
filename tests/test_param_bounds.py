"""Bounds live in the protocol types (msgspec ``Meta``): the JSON Schema and the generated
TypeScript types show them, and the dispatcher answers a value outside them with -32009
(invalid input) while a value of the wrong type stays -32602 (invalid params)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocol.assemble import MAX_SEARCH_K, AssembleParams, SearchParams
from protocol.engines import MAX_EMBED_TEXTS, EmbedParams, SummarizeParams
from sidecar.server.coerce import ParamsError, convert_or_explain

SCHEMA = Path(__file__).resolve().parent.parent / "protocol" / "schema" / "libravdb.schema.json"


def _prop(defs: dict[str, Any], struct: str, field: str) -> dict[str, Any]:
    prop: dict[str, Any] = defs[struct]["properties"][field]
    return prop


def test_the_schema_shows_the_bounds() -> None:
    defs = json.loads(SCHEMA.read_text())["$defs"]
    assert _prop(defs, "SearchParams", "k")["minimum"] == 1
    assert _prop(defs, "SearchParams", "k")["maximum"] == MAX_SEARCH_K
    assert _prop(defs, "AssembleParams", "tokenBudget")["exclusiveMinimum"] == 0
    fraction = _prop(defs, "AssembleParams", "memoryBudgetFraction")
    assert (fraction["exclusiveMinimum"], fraction["maximum"]) == (0, 1)
    assert _prop(defs, "EmbedParams", "texts")["maxItems"] == MAX_EMBED_TEXTS


@pytest.mark.parametrize(
    ("kind", "params", "field"),
    [
        (SearchParams, {"query": "q", "k": 0}, "$.k"),
        (SearchParams, {"query": "q", "k": MAX_SEARCH_K + 1}, "$.k"),
        (AssembleParams, {"sessionId": "s", "tokenBudget": 0}, "$.tokenBudget"),
        (
            AssembleParams,
            {"sessionId": "s", "tokenBudget": 10, "memoryBudgetFraction": 1.5},
            "$.memoryBudgetFraction",
        ),
        (EmbedParams, {"texts": ["a"] * (MAX_EMBED_TEXTS + 1)}, "$.texts"),
        (SummarizeParams, {"texts": ["a"], "density": 0}, "$.density"),
    ],
)
def test_a_value_outside_a_bound_is_invalid_input(
    kind: type, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(ParamsError) as caught:
        convert_or_explain(params, kind)
    assert caught.value.out_of_bounds
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        (SearchParams, {"query": "q", "k": "many"}),
        (SearchParams, {"k": 3}),
        (AssembleParams, {"sessionId": "s", "tokenBudget": 10, "budget": 3}),
    ],
)
def test_a_malformed_request_stays_invalid_params(kind: type, params: dict[str, Any]) -> None:
    with pytest.raises(ParamsError) as caught:
        convert_or_explain(params, kind)
    assert not caught.value.out_of_bounds
