"""Commit messages: written with `Key: value` trailers, and read back from `git log` as Commits.

Trailers are how specflux tells its own commits apart ("is this ours?" survives restarts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from specflux.vcs.values import Commit

_TRAILER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*\Z")
FIELD, RECORD = "\x1f", "\x1e"
LOG_FORMAT = "%H%x1f%h%x1f%aI%x1f%s%x1f%(trailers:only,unfold)%x1e"  # one `parse_commit` record


def commit_message(subject: str, trailers: Mapping[str, str], body: str) -> str:
    """Subject, blank line, body, blank line, `Key: value` trailers."""
    subject = subject.strip()
    if not subject or "\n" in subject:
        raise ValueError(f"a commit subject is one non-empty line, not {subject!r}")
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.match(key) or "\n" in str(value) or "\r" in str(value):
            raise ValueError(f"not a git trailer: {key!r}: {value!r}")
        lines.append(f"{key}: {value}")
    return "\n\n".join(part for part in (subject, body.strip(), "\n".join(lines)) if part) + "\n"


def parse_commit(record: str) -> Commit:
    """One record of `git log --format=LOG_FORMAT` (split on RECORD)."""
    sha, short, date, subject, trailer_text = record.split(FIELD, 4)
    trailers = {}  # a key given twice keeps its last value
    for line in trailer_text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            trailers[key.strip()] = value.strip()
    return Commit(sha, short, date, subject, trailers)
