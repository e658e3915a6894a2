"""Whether and when writes reach the disk: each write's own fsyncs (the default), none
(`not_durable`: a replay into a throw-away clone), or a workflow step's together at its end
(`synced_together`)."""

from __future__ import annotations

import errno
import os
from _thread import get_ident  # (not `threading`: a one-task command never imports it)
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specflux.base.errors import SpecfluxError

_durable = True  # fsync what is written; off only inside `not_durable()`


@contextmanager
def not_durable() -> Iterator[None]:
    """Within the block, this process's writes (atomic_write, a run's event log) skip their fsyncs:
    for a replay into a throw-away clone, which a crash leaves to be replayed again anyway. Each
    write is still whole for readers (temporary file and rename, appends under a lock)."""
    global _durable
    was, _durable = _durable, False
    try:
        yield
    finally:
        _durable = was


def durable() -> bool:
    """Whether writes are fsynced (see `not_durable`)."""
    return _durable


_together: "dict[int, dict[str, None]]" = {}  # thread id -> paths whose fsync `synced_together` makes


@contextmanager
def synced_together() -> Iterator[None]:
    """Within the block (in this thread), atomic_write replaces files without its two fsyncs, and
    the block's end makes them: once per file and once per folder, however often each was written.
    A workflow step's writes (its session's entries, summaries, baselines: a dozen files written
    twice each) become durable together, before the step is recorded as finished in the run's
    event log; a power loss before that leaves a step that resumes as one never finished.
    Nested blocks sync at the outermost's end."""
    me = get_ident()
    if me in _together:
        yield
        return
    _together[me] = pending = {}
    failed = True
    try:
        yield
        failed = False
    finally:
        del _together[me]
        _sync_paths(pending, quiet=failed)


def _sync_paths(paths: "dict[str, None]", quiet: bool) -> None:
    """fsync each of `paths` that still exists (files before the folders they were renamed in)."""
    if not _durable:
        return
    for path in sorted(paths, key=lambda p: p.endswith(os.sep)):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # removed since (a temporary folder, a hand-in's): nothing to keep
            continue
        try:
            os.fsync(fd)
        except OSError as e:
            if not quiet and e.errno not in (errno.EINVAL, errno.EBADF):  # (folders some systems cannot sync)
                raise SpecfluxError(f"cannot make this file durable: {e.strerror}", path) from None
        finally:
            os.close(fd)


def sync_later(path: Path) -> bool:
    """Whether the fsyncs of a write of `path` are left to the `synced_together` block this thread
    is in (noted for its end); False outside one."""
    together = _together.get(get_ident())
    if together is None:
        return False
    together[str(path)] = None
    together[os.path.join(path.parent, "")] = None
    return True
