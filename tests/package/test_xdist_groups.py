"""The suite's tests that share a fixture made once per module run on one pytest-xdist worker
(tests/xdist_groups.py), with the pytest and pytest-xdist this environment has: a project of four
such tests, run in two workers, makes its module fixture once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import pytest
from xdist_groups import group_module_fixture_users

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_module_fixture_users(items)
"""

MODULE = """
import os
import pytest

@pytest.fixture(scope="module")
def made_once(tmp_path_factory):
    with open(os.environ["MADE"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("n", range(4))
def test_uses_it(made_once, n):
    pass

@pytest.mark.parametrize("n", range(4))
def test_does_not(n):
    pass
"""


def test_tests_sharing_a_module_fixture_run_on_one_worker_and_make_it_once(tmp_path: Path):
    pytest.importorskip("xdist")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_shared.py").write_text(MODULE)
    made = tmp_path / "made.txt"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "-q", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "MADE": str(made), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout, done.stdout
    workers = made.read_text().split()
    assert len(workers) == 1, (f"the module fixture was made {len(workers)} times, on {workers}: --dist loadgroup "
                               "did not keep its tests on one worker (see pyproject.toml's pytest pin)")
