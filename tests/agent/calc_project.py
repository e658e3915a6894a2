"""The small project the real agent CLIs work on in tests (test_claude_code.py, test_cli_presets.py):
`src/calc.py` whose `add` is wrong, `test_calc.py` that fails on it, `[validate]` running that test,
and task 1 "Fix add" (with `document=True`, task 2 "Document add" depending on it), committed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from conftest import git
from helpers import run

TOOLS = Path(os.environ.get("SPECFLUX_TEST_TOOLS", Path.home() / ".cache" / "specflux-test-tools"))
WRONG = "def add(a, b):\n    return a - b\n"
STILL_WRONG = "def add(a, b):\n    return a * b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
TEST = "import sys\nsys.path.insert(0, 'src')\nfrom calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('ok')\n"
PLACEHOLDER = "(To be completed)"


def calc_project(git_repo: Path, capsys, document: bool = False) -> Path:
    (git_repo / "src").mkdir()
    (git_repo / "src" / "calc.py").write_text(WRONG)
    (git_repo / "test_calc.py").write_text(TEST)
    (git_repo / ".gitignore").write_text("__pycache__/\n")
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    with open(git_repo / ".specflux" / "config.toml", "a") as f:
        f.write(f'\n[validate]\ncommand = "{sys.executable} test_calc.py"\n')
    assert run(capsys, git_repo, "new", "Fix add", "--ac", "add returns the sum")[0] == 0
    if document:
        assert run(capsys, git_repo, "new", "Document add", "--dep", "1", "--ac", "README explains add")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo
