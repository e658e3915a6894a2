"""The user's index after a session commit: which committed paths must follow the new HEAD.

A session commit is built in a temporary index; afterwards the entries of the user's index that
were HEAD's for the committed paths are moved to the new commit (else they would show as a staged
revert). A journal in the git dir names them before the commit is made, so that a kill between
the commit and that update is repaired by specflux's next commit (`index_follows_head`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from specflux.vcs.process import nul_list

FOLLOW_JOURNAL = "specflux-index-follow.json"  # in the git dir, while a session commit is made


def index_follows_head(git_dir: Path, run: Callable[..., subprocess.CompletedProcess[str]]) -> bool:
    """Finish what a session commit cut short by a kill: the paths it committed whose entry in
    the user's index is still the old HEAD's (they would show as a staged revert) follow HEAD.
    An entry the user has staged anything else into since is left alone. `run(*args)` runs git
    in the work tree (`Git._git`). Run it before reading the status (a stale entry reads as the
    user's staged work); True when there was a journal (a status read before is stale)."""
    journal = git_dir / FOLLOW_JOURNAL
    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
        old, paths = str(data["head"]), [str(p) for p in data["paths"]]
    except FileNotFoundError:
        return False
    except (ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)
        return True
    head = run("rev-parse", "-q", "--verify", "HEAD").stdout.strip()
    stale = []
    if head and head != old:
        listed = run("--literal-pathspecs", "ls-files", "-s", "-z", "--", *paths).stdout
        staged = {rec.split("\t", 1)[1]: rec.split()[1] for rec in listed.split("\0") if "\t" in rec}
        for path in paths:
            was = run("rev-parse", "-q", "--verify", f"{old}:{path}").stdout.strip()
            if was and staged.get(path) == was:
                stale.append(path)
    if stale:
        run("--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul",
            head, input=nul_list(stale))
    journal.unlink(missing_ok=True)
    return True
