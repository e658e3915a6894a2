"""The fast tier (tests/tier.py, `pytest -m fast`) keeps covering every floor of the code: a floor
added to pyproject.toml's layers, a folder added to tests/, or a test renamed or removed from under
the tier fails here, by name."""

from __future__ import annotations

import ast
from pathlib import Path

from tier import FAST, is_fast

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
# a floor whose tests live under another name
TEST_FOLDER = {"mcp_server": "mcp"}


def floors() -> list[str]:
    """Every package on a floor of pyproject.toml's first layers contract ("specflux.a | specflux.b": both)."""
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    return [name.strip().removeprefix("specflux.") for layer in contract["layers"] for name in layer.split("|")]


def test_every_floor_and_every_test_folder_has_tests_in_the_fast_tier():
    floor_folders = {TEST_FOLDER.get(floor, floor) for floor in floors()}
    assert {"base", "format", "vcs", "store", "agent", "importers", "flow", "surface", "board", "mcp", "cli",
            "demo"} <= floor_folders, floor_folders
    test_folders = {p.parent.name for p in (ROOT / "tests").glob("*/test_*.py")}
    missing = sorted(folder for folder in floor_folders | test_folders
                     if not any(entry.startswith(f"tests/{folder}/") for entry in FAST))
    assert not missing, f"no test of tests/{{{','.join(missing)}}} in the fast tier: add one to tests/tier.py"


def test_every_entry_of_the_tier_names_a_test_that_exists():
    stale = []
    for entry in FAST:
        module, _, function = entry.partition("::")
        path = ROOT / module
        if not path.is_file():
            stale.append(entry)
            continue
        if function:
            defined = {node.name for node in ast.parse(path.read_text()).body
                       if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if function not in defined:
                stale.append(entry)
    assert not stale, f"tests/tier.py names tests that are not there (renamed? removed?): {stale}"
    assert len(set(FAST)) == len(FAST), "an entry is listed twice"


def test_the_tier_takes_a_module_whole_or_a_function_with_all_its_parameters():
    assert is_fast("tests/base/test_terminal.py::test_anything[with-a-parameter]")
    assert is_fast("tests/flow/test_flow.py::test_retries_exhausted_fail_the_task_and_block_its_dependents")
    assert is_fast("tests/flow/test_flow.py::test_retries_exhausted_fail_the_task_and_block_its_dependents[x]")
    assert not is_fast("tests/flow/test_flow.py::test_retries_exhausted_fail_the_task")
    assert not is_fast("tests/flow/test_kill_points.py::test_kill_9_at_random_moments_then_resume[1]")
