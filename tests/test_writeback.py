"""Write-back: completing an imported task ticks it in its source, one line, nothing else."""

from __future__ import annotations

import json

import pytest

from specflux.importers.writeback import pass_feature, tick_tasks_md

TASKS_MD = (
    "# Tasks\n\n## Phase 1: Setup\n\n"
    "- [ ] T001 Create project structure\n"
    "- [ ] T002 [P] Configure linting in `ruff.toml`\n"
    "- [x] T003 Already done\n"
)


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(before.splitlines(True), after.splitlines(True)) if a != b]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_ticking_a_task_changes_its_one_line_in_the_files_own_line_endings(newline):
    text = TASKS_MD.replace("\n", newline)
    after = tick_tasks_md(text, 6, "T002")
    assert changed_lines(text, after) == [(f"- [ ] T002 [P] Configure linting in `ruff.toml`{newline}",
                                           f"- [x] T002 [P] Configure linting in `ruff.toml`{newline}")]
    assert len(after) == len(text)


def test_a_line_that_is_no_longer_the_task_is_left_alone():
    assert tick_tasks_md(TASKS_MD, 5, "T002") is None, "line 5 is T001's: the source was edited since"
    assert tick_tasks_md(TASKS_MD, 99, "T001") is None
    assert tick_tasks_md(TASKS_MD, 7, "T003") == TASKS_MD, "already ticked: nothing to do"


FEATURES_ARRAY = """[
  {
    "category": "functional",
    "description": "Login works",
    "steps": ["Step 1: open", "Step 2: log in"],
    "passes": false
  },
  {
    "category": "functional",
    "description": "Logout works",
    "steps": ["Step 1: log out"],
    "passes": false
  }
]
"""


def test_passing_a_feature_changes_its_one_value():
    after = pass_feature(FEATURES_ARRAY, 1)
    assert changed_lines(FEATURES_ARRAY, after) == [('    "passes": false\n', '    "passes": true\n')]
    assert json.loads(after)[1]["passes"] is True and json.loads(after)[0]["passes"] is False


def test_passing_a_feature_by_id_in_an_object_file():
    text = json.dumps({"version": 1, "features": [{"id": "ssh", "passes": False}, {"id": "web", "passes": False}]},
                      indent=2)
    after = pass_feature(text, "web")
    assert [f["passes"] for f in json.loads(after)["features"]] == [False, True]
    assert len(changed_lines(text, after)) == 1
