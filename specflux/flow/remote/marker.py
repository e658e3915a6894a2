"""Marker commits: the small commits the queue keeps on the remote as refs (claims, completion
records, releases): the empty tree, a few parents, one line of JSON as the message, made by
`specflux` (they are markers, not anyone's work). And the one shape of time they carry."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from specflux.flow.remote.transport import IDENTITY, Remote


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def marker(remote: Remote, fields: dict[str, Any], parents: tuple[str, ...] = (), tree: str | None = None) -> str:
    """A commit with the empty tree (or `tree`), `parents`, and `fields` as its one-line JSON message."""
    from specflux.base.errors import GitError

    args = ["commit-tree", tree or remote.empty_tree()]
    for parent in parents:
        args += ["-p", parent]
    done = remote.git(*args, "-m", json.dumps(fields, sort_keys=True), env=IDENTITY)
    if done.returncode:
        raise GitError(f"git commit-tree failed: {done.stderr.strip()}")
    return done.stdout.strip()
