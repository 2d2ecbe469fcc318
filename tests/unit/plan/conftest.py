"""Fixtures of the plan tests: a private manifest cache (the weights tests)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def env(tmp_path) -> dict:
    """A private manifest cache for the test."""
    return dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
