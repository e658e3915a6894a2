"""Tests that share a fixture made once per module (a wheel built and installed, a browser) run on
one pytest-xdist worker, so the fixture is made once: `--dist loadgroup` (pyproject.toml) sends
the tests of one `xdist_group` to one worker. tests/package/test_xdist_groups.py checks that this
still holds with the pytest and pytest-xdist installed (pytest 9.2 broke it: pyproject.toml)."""

from __future__ import annotations

import pytest


def group_module_fixture_users(items: list[pytest.Item]) -> None:
    """Mark each test that uses a module- or package-scoped fixture with its module's group."""
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(d.scope in ("module", "package") for ds in defs.values() for d in ds):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
