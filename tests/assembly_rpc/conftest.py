"""Every test here runs on both store backends (``store_target``, tests/conftest.py): the
harnesses and ``start_daemon`` open the current one."""

from __future__ import annotations

import pytest

from tests.support import StoreTarget


@pytest.fixture(autouse=True)
def _both_backends(store_target: StoreTarget) -> StoreTarget:
    return store_target
