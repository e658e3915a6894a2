"""Reading task files from a commit of the queue's branch without checking it out: which task files
a commit has, and the text and status of files at any commits, through one `git cat-file --batch`."""

from __future__ import annotations

import re
import subprocess
from typing import Iterable

from specflux.flow.remote.transport import Remote

TASK_FILE = re.compile(r"(?:^|/)task-states/task-(.+)-state\.md$")


def task_files(remote: Remote, commit: str) -> dict[str, str]:
    """{task id: the path of its file} at `commit`."""
    listed = remote.git("ls-tree", "-r", "--name-only", commit).stdout.splitlines()
    return {found.group(1): path for path in listed if (found := TASK_FILE.search(path))}


def read_blobs(remote: Remote, specs: Iterable[str]) -> dict[str, str]:
    """{"REV:PATH": its text} for each spec that names a file (sizes are in bytes, so read as bytes)."""
    specs = list(specs)
    if not specs:
        return {}
    done = subprocess.run(["git", "cat-file", "--batch"], cwd=remote.root, capture_output=True,
                          input="".join(f"{spec}\n" for spec in specs).encode())
    data, pos, out = done.stdout, 0, {}
    for spec in specs:
        end = data.find(b"\n", pos)
        if end < 0:
            break
        header = data[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue  # "<spec> missing": no such file there
        size = int(header[2])
        out[spec] = data[pos:pos + size].decode("utf-8", "replace")
        pos += size + 1
    return out


def status_of(text: str | None, path: str) -> str:
    """A task file's status; "missing" for no file, "broken" for one that cannot be read."""
    from specflux.base.errors import SpecfluxError
    from specflux.format.document import TaskDocument

    if text is None:
        return "missing"
    try:
        return TaskDocument(text, path).status
    except SpecfluxError:  # a file a person broke on the remote: shown, not a reason to show nothing
        return "broken"
