"""What every surface does with tasks before the library does the rest: open the TaskStateManager
of the workspace it serves, and refuse `complete` for the task a workflow run is driving (the CLI's
`specflux complete` and the MCP server's `complete_task` alike)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.vcs.git import Git


def open_manager(root: str | None, commit: bool = True, git: "Git | None" = None) -> TaskStateManager:
    """The TaskStateManager of the workspace at `root` (None: SPECFLUX_ROOT, else the nearest
    `.specflux/` upwards); it commits only when `commit` and the workspace's config both say so.
    `git`: the repository, when the caller found it already (a worker opens one manager a task)."""
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    ws = Workspace.find(explicit=root)
    return TaskStateManager(ws, git=(git or True) if commit and ws.config.commit else False)


def refuse_complete_inside_run(task_id: str) -> None:
    """Inside a workflow run, the run completes its task: a UsageError for the run's own task."""
    if os.environ.get("SPECFLUX_RUN") and os.environ.get("SPECFLUX_ROLE") and \
            os.environ.get("SPECFLUX_TASK_ID") == task_id.lstrip("#"):
        from specflux.base.errors import Refused

        raise Refused(f"inside workflow run {os.environ['SPECFLUX_RUN']}, the run completes task {task_id} when "
                         "the workflow accepts it: write `### Summary` and `### For Downstream Tasks` under "
                         "`## 4. Chain Output` in the task file instead")
