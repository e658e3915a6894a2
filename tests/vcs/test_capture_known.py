"""A session's baseline from a status the caller knows (`Git.capture(known)`): a run's coder right
after its reviewer's commit starts from the status that commit left (one `git status` fewer a
task), but only while HEAD is the commit it names: after any other commit git is asked again.
(The whole run: tests/flow/test_step_git_processes.py.)"""

from __future__ import annotations

from pathlib import Path

from conftest import git

from specflux.vcs.git import Git
from specflux.vcs.status import StatusEntry


def test_a_known_status_stands_while_head_is_the_commit_it_names(git_repo: Path):
    (git_repo / "mine.txt").write_text("the user's work in progress\n")
    g = Git(git_repo)
    head = g.head()
    fresh = g.capture()
    assert set(fresh.dirty) == {"mine.txt"}
    # a known status (here: one that also names a file git would call clean) is taken as it is ...
    known = (head, {"mine.txt": StatusEntry("??"), "README.md": StatusEntry(".M", "100644", "100644", "100644")})
    taken = g.capture(known)
    assert taken.head == head and set(taken.dirty) == {"mine.txt", "README.md"}
    assert taken.dirty["mine.txt"].fingerprint == fresh.dirty["mine.txt"].fingerprint  # examined now
    # ... until a commit moves HEAD: then git is asked again
    git(git_repo, "commit", "-q", "--allow-empty", "-m", "a person's commit")
    again = g.capture(known)
    assert again.head == g.head() != head and set(again.dirty) == {"mine.txt"}
    assert set(g.capture(("", {})).dirty) == {"mine.txt"}  # (an unborn HEAD is never taken on trust)
