"""Naming rules and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sidecar.store import InvalidInput, dims_for_collection, in_namespace
from sidecar.store import names as N


@pytest.mark.parametrize(
    ("name", "dims"),
    [
        ("user:u1", 384),
        ("session:s1", 384),
        ("turns:ns", 384),
        ("global", 384),
        ("authored:variant", 384),
        ("authored:hard", 1),
        ("authored:soft", 1),
        ("_internal:lifecycle_journal", 1),
        ("_tier_dirty", 1),
        ("session_edge:s1", 1),
        ("session_state:s1", 1),
        ("session:s1:64d", 64),
        ("user:u1:256d", 256),
        ("session_edge", 384),  # no colon: not the edge family
    ],
)
def test_dims_for_collection(name: str, dims: int) -> None:
    assert dims_for_collection(name, 384) == dims


def test_namespace_is_exact() -> None:
    assert in_namespace("user:u1", "user:u1")
    assert in_namespace("user:u1:notes", "user:u1")
    assert not in_namespace("user:u10", "user:u1")
    assert not in_namespace("user:u1x", "user:u1")
    assert N.filter_namespace(["user:u1", "user:u10", "user:u1:a"], "user:u1") == [
        "user:u1",
        "user:u1:a",
    ]


@pytest.mark.parametrize(
    "bad",
    ["", "a\x00b", "tab\there", "line\nbreak", "del\x7f", "c1\x85", "x" * 257, "é" * 129, 5],
)
def test_invalid_collection_names(bad: object) -> None:
    with pytest.raises(InvalidInput):
        N.validate_collection(bad)


def test_collection_name_limits() -> None:
    assert N.validate_collection("x" * 256) == "x" * 256
    assert N.validate_collection("é" * 128) == "é" * 128  # 256 bytes
    assert N.validate_collection("user:ünïcode 名前") == "user:ünïcode 名前"


@pytest.mark.parametrize("bad", ["", "x" * 1025, "é" * 513, "a\x00b", "\ud800", None, 3])
def test_invalid_ids(bad: object) -> None:
    with pytest.raises(InvalidInput):
        N.validate_id(bad)


def test_id_limits() -> None:
    assert N.validate_id("x" * 1024)
    assert N.validate_id("session:s1:turn 1/ä")


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2],
        "text",
        3,
        {"a": math.nan},
        {"a": {"b": math.inf}},
        {1: "int key"},
        {"a": {1, 2}},
        {"a": object()},
    ],
)
def test_invalid_metadata(bad: object) -> None:
    with pytest.raises(InvalidInput):
        N.validate_metadata(bad)


def test_valid_metadata() -> None:
    meta = {"i": 1, "f": 1.0, "b": True, "n": None, "l": [1, "x", {"y": 2.5}], "big": 2**70}
    assert N.validate_metadata(meta) == meta
    assert N.validate_metadata(None) == {}


def test_vectors() -> None:
    v = N.as_vector([1, 2, 3], 3, "c")
    assert v.dtype == np.float32 and v.shape == (3,)
    with pytest.raises(InvalidInput, match="dimensions 2 do not match collection c dimensions 3"):
        N.as_vector([1, 2], 3, "c")
    with pytest.raises(InvalidInput):
        N.as_vector([1, math.nan, 3], 3, "c")
    with pytest.raises(InvalidInput):
        N.as_vector([[1, 2, 3]], 3, "c")
    with pytest.raises(InvalidInput):
        N.as_vector(["a", "b", "c"], 3, "c")
    assert not N.normalized(np.zeros(3, dtype=np.float32)).any()


def test_ts_from_metadata() -> None:
    assert N.ts_from_metadata({"ts": 5}, 1) == 5
    assert N.ts_from_metadata({"ts": 5.9}, 1) == 5
    assert N.ts_from_metadata({"ts": " 7 "}, 1) == 7
    assert N.ts_from_metadata({"ts": "soon"}, 1) == 1
    assert N.ts_from_metadata({"ts": True}, 1) == 1
    assert N.ts_from_metadata({"ts": 2**80}, 1) == 1
    assert N.ts_from_metadata({}, 1) == 1


def test_json_equal() -> None:
    assert N.json_equal(1, 1.0)
    assert not N.json_equal(1, "1")
    assert not N.json_equal(True, 1)
    assert N.json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not N.json_equal({"a": 1}, {"a": 1, "b": 2})
    assert N.json_equal(None, None)
