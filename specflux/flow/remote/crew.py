"""Several workers in one clone (`flow start --all --remote NAME --parallel N`): N workers, each a
thread in a git worktree of its own (`.specflux/worktrees/workers/<n>`, detached), with tracking refs
of its own so that their fetches never wait on each other's ref locks. To the remote they are N
workers like any others (`<worker>/1`, `<worker>/2`, ...), claiming through the same refs. When all
have stopped, the worktrees are removed and the clone's branch is brought up to the remote.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from specflux.base.records import field_names
from specflux.flow.remote.worker import Options, Report, Worker

if TYPE_CHECKING:
    from specflux.flow.steps.roles import Agents
    from specflux.store.manager import TaskStateManager


def run_crew(root: Path, options: Options, agents: "Agents", count: int, *,
             open_manager: Callable[[Path], "TaskStateManager"], say: Callable[[str], None] = lambda line: None) -> Report:
    """Run `count` workers in worktrees of the clone at `root`; their reports as one."""
    from specflux.flow.lanes.worktrees import current_branch
    from specflux.flow.remote.one_worker import only_worker

    lead = Worker(root, options, agents, open_manager=lambda: open_manager(root), say=say)  # checks what one checks
    with only_worker(root, f"{options.worker}/1..{count}", options.remote, current_branch(root) or "?"):
        return _crew(root, options, agents, count, lead, open_manager, say)


def _crew(root: Path, options: Options, agents: "Agents", count: int, lead: Worker,
          open_manager: Callable[[Path], "TaskStateManager"], say: Callable[[str], None]) -> Report:
    from specflux.flow.lanes.worktrees import current_branch
    from specflux.flow.remote.transport import Remote

    from specflux.flow.remote.integrate import ensure_driver

    branch = current_branch(root)
    lead.remote.fetch()
    ensure_driver(lead.remote)  # the worktrees share this config: written once here, never by N threads at once
    base = root / ".specflux" / "worktrees" / "workers"
    crew, reports, errors = [], [], []
    for n in range(1, count + 1):
        place = base / str(n)
        lead.remote.git("worktree", "remove", "--force", str(place))  # a crew killed before it tidied up
        done = lead.remote.git("worktree", "add", "-q", "--detach", str(place), lead.remote.tracking)
        if done.returncode:
            from specflux.base.errors import GitError

            raise GitError(f"git worktree add failed: {done.stderr.strip()}")
        mine = Options(**{name: getattr(options, name) for name in field_names(Options)})
        mine.worker = f"{options.worker}/{n}"
        crew.append(Worker(place, mine, agents, open_manager=lambda place=place: open_manager(place),
                           say=lambda line, n=n: say(f"[{n}] {line}"), branch=branch, track_as=re.sub(r"[^A-Za-z0-9._/-]", "-", mine.worker)))

    def work(worker: Worker) -> None:
        try:
            reports.append(worker.run())
        except BaseException as e:  # said by the lead thread, after the others are done
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,), name=w.options.worker) for w in crew]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in range(1, count + 1):
        lead.remote.git("worktree", "remove", "--force", str(base / str(n)))
    lead.remote.git("worktree", "prune")
    for worker in crew:  # the workers' own tracking refs go with them
        for prefix in (f"refs/specflux/track/{worker.remote.track_as}/", f"refs/specflux/seen/{worker.remote.track_as}/"):
            for ref in lead.remote.git("for-each-ref", "--format=%(refname)", prefix).stdout.split():
                lead.remote.git("update-ref", "-d", ref)
    Remote(root, options.remote, lead.remote.branch).fetch()
    lead.remote.git("-c", "maintenance.auto=false", "merge", "-q", "--ff-only", lead.remote.tracking)
    lead.remote.maintain()  # what the crew's fetches left undone, once
    if errors:
        raise errors[0]
    merged = Report(options.worker)
    for report in reports:
        merged.integrated.update(report.integrated)
        merged.lost.update(report.lost)
        merged.conflicts.update(report.conflicts)
        merged.unfinished.update(report.unfinished)
        merged.runs += report.runs
        merged.held_back.update(report.held_back)
        merged.stopped = merged.stopped or report.stopped
        for key, values in report.timings.items():
            merged.timings[key] += values
    return merged
