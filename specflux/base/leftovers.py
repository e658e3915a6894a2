"""What a killed process left behind: the temporary files of its atomic writes
(`base/files.py` `atomic_write` names them `.NAME.PID.xxxx.tmp`), told from a live writer's by
whether the process named in them still runs (`alive`)."""

from __future__ import annotations

import os
from pathlib import Path


def remove_stale_temps(path: Path) -> None:
    """Remove the temporary files of `path` that a killed process left behind (atomic_write's
    `.NAME.PID.xxxx.tmp`, whose process is gone); the file itself was never half written."""
    _remove_stale(path.parent, f".{path.name}.")


def remove_stale_temps_in(folder: Path) -> None:
    """remove_stale_temps for every file in `folder` (one listing: a resume tidying up)."""
    _remove_stale(folder, ".")


def _remove_stale(folder: Path, prefix: str) -> None:
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        parts = name[:-len(".tmp")].rsplit(".", 2)  # .NAME, PID, mkstemp's random part
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) == os.getpid() or alive(int(parts[1])):
            continue
        try:
            os.unlink(folder / name)
        except OSError:
            pass


def alive(pid: int) -> bool:
    """Whether process `pid` runs (another user's too: it cannot be signalled, but it is there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
