"""What an agent session receives: the protocol and rules (a stable, cacheable prefix), then the
task file with its chain inputs embedded, and links to what is only sometimes needed.

Embed what every session needs (requirements, criteria, chain input summaries, the recent progress
log); link what is rarely needed (the archive, a PRD, the epic, upstream outputs in full). The
task file is capped by archiving, so the context stays bounded however long the task runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..chain import upstream_of, wire_into
from ..document import TaskDocument

if TYPE_CHECKING:
    from ..store import TaskStateManager

PROTOCOL = """\
## Session Protocol

### Phase 1: Orientation
1. Read the task state below completely
2. Run `git status` (run_command) to check the state of the repository
3. Review the acceptance criteria - find unchecked items

### Phase 2: Implementation
4. Pick ONE unchecked criterion to work on
5. Read relevant source files first (read_file, search, list_files)
6. Implement directly (write_file, edit_file) - don't just suggest
7. Write tests to verify it works, and run them (run_command)

### Phase 3: Handoff
8. Check off each criterion you verified with the check_criterion tool
9. Call end_session with what you did (did: one bullet per item), any issues, and next steps
10. If all criteria are checked, include chain_output in end_session: a summary of what was
    built, and for downstream tasks the API contracts and integration notes they need"""

RULES = """\
## Rules

DO NOT suggest changes. IMPLEMENT them.
DO NOT add features beyond acceptance criteria.
DO NOT create abstractions for single-use code.
DO NOT assume file contents - read first.
DO NOT edit the task-state file by hand: use check_criterion and end_session.

DO check off criteria only after testing.
DO update the progress log (end_session) before ending the session.
DO keep solutions simple and direct."""

SYSTEM = f"""\
You are a coding agent working on one task of a larger project, for one session. Your memory
does not carry over between sessions: the task-state file is the only hand-over, so read it
first and leave it better than you found it. All paths are relative to the repository root.

{PROTOCOL}

{RULES}"""

_MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


@dataclass
class SessionContext:
    system: str
    user: str
    links: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.system) + estimate_tokens(self.user)


def estimate_tokens(text: str) -> int:
    """An offline estimate: about 3.5 characters a token for English prose and code."""
    return math.ceil(len(text) / 3.5)


def build_context(manager: "TaskStateManager", task_id: str) -> SessionContext:
    doc = manager.load(task_id)
    ws = manager.ws
    rel = ws.relative(manager.path(task_id))
    upstreams = [up for dep in doc.dependencies if manager.path(dep).is_file() and (up := upstream_of(manager, dep))]
    text = wire_into(doc, upstreams)  # in memory: the freshest chain inputs, even before `wire`
    fresh = TaskDocument(text, doc.path)

    links: list[tuple[str, str]] = []
    archive = ws.archive_path(task_id)
    if archive.is_file():
        links.append((ws.relative(archive), f"sessions {_archived_range(fresh)} in full (archived)"))
    for up in upstreams:
        links.append((ws.relative(manager.path(up.task_id)), f"task #{up.task_id}'s full chain output (section 4)"))
    for label, target in _MD_LINK.findall(fresh.body_text(fresh.sections.get("context"))):
        if "://" not in target and not target.startswith("#"):
            links.append((_repo_path(ws, manager.path(task_id), target), label))

    lines = [
        f"# Session on task #{task_id}: {fresh.title[1]}",
        "",
        f"The task-state file is `{rel}`. Its current content, with chain inputs from upstream",
        "tasks embedded, is below between the markers.",
        "",
        "<task-state>",
        text.rstrip("\r\n"),
        "</task-state>",
    ]
    if links:
        lines += ["", "Read these with read_file only when you need them:"]
        lines += [f"- `{path}`: {what}" for path, what in links]
    return SessionContext(SYSTEM, "\n".join(lines), [p for p, _ in links])


def _archived_range(doc: TaskDocument) -> str:
    a = doc.archived_region
    return f"{a[0]}-{a[1]}" if a else "1-?"


def _repo_path(ws, task_file, target: str) -> str:
    """A link written in a task file, as a path from the repository root."""
    target = target.split("#", 1)[0]
    if target.startswith("/"):
        return target.lstrip("/")
    return ws.relative((task_file.parent / target).resolve())
