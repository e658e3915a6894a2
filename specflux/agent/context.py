"""What an agent session receives: the protocol and rules (a stable, cacheable prefix), then the
task file with its chain inputs embedded, and links to what is only sometimes needed.

Embed what every session needs (requirements, criteria, chain input summaries, the recent progress
log); link what is rarely needed (the archive, a PRD, the epic, upstream outputs in full). The
task file is capped by archiving, so the context stays bounded however long the task runs.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Literal

from specflux.base.records import Factory, record
from specflux.store.chain import upstream_of, wire_into
from specflux.format.document import TaskDocument

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

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

# The same protocol for an agent CLI (Claude Code, Codex, ...): it has its own tools under its own
# names, so it reads and edits the task file itself, or hands over through the `specflux` commands.
COMMAND_PROTOCOL = """\
## Session Protocol

### Phase 1: Orientation
1. Read the task-state file (path below, also in $SPECFLUX_TASK_FILE; the task id is in
   $SPECFLUX_TASK_ID); its current content is below too
2. Run `git status` to check the state of the repository
3. Review the acceptance criteria - find unchecked items

### Phase 2: Implementation
4. Pick ONE unchecked criterion to work on
5. Read relevant source files first
6. Implement directly with your own editing tools - don't just suggest
7. Write tests to verify it works, and run them

### Phase 3: Handoff, in the task-state file
8. Tick each criterion you verified: `- [ ]` becomes `- [x]`
   (or run `specflux check $SPECFLUX_TASK_ID N`)
9. Append your session at the end of `## 3. Progress Log`, numbered as given below:

   ### Session N - YYYY-MM-DD HH:MM
   **Did:**
   - one bullet per item

   **Issues:** problems met, or None

   **Next:** what the next session should do

   (or run `specflux session $SPECFLUX_TASK_ID --did "..." --issues "..." --next "..." --no-commit`,
   one --did per bullet)
10. If all criteria are ticked, replace the placeholder of `## 4. Chain Output` with
    `### Summary` (what was built) and `### For Downstream Tasks` (the API contracts and
    integration notes dependent tasks need)
    (or run `specflux complete $SPECFLUX_TASK_ID --summary "..." --downstream "..." --no-commit`)"""

COMMAND_RULES = """\
## Rules

DO NOT suggest changes. IMPLEMENT them.
DO NOT add features beyond acceptance criteria.
DO NOT create abstractions for single-use code.
DO NOT assume file contents - read first.
DO NOT commit: specflux checks the task-state file and commits everything after the session.
DO NOT edit other tasks' files, or your task file's metadata block, except through `specflux` commands.

DO check off criteria only after testing.
DO write your progress-log entry before ending the session.
DO keep solutions simple and direct."""

COMMAND_SYSTEM = f"""\
You are a coding agent working on one task of a larger project, for one session. Your memory
does not carry over between sessions: the task-state file is the only hand-over, so read it
first and leave it better than you found it. You work in the repository root, with your own tools.

{COMMAND_PROTOCOL}

{COMMAND_RULES}"""

ContextForm = Literal["tools", "command"]

_MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


@record
class SessionContext:
    system: str
    user: str
    links: list[str] = Factory(list)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.system) + estimate_tokens(self.user)


def estimate_tokens(text: str) -> int:
    """An offline estimate: about 3.5 characters a token for English prose and code."""
    return math.ceil(len(text) / 3.5)


REVIEW_TOOLS = """Hand in your verdict with the submit_review tool: `approved`, one `criteria_results` entry per
acceptance criterion (`criterion`, `met`), and `issues` (`severity`: blocker, major or minor;
`description`: what is wrong and where). Read the code (read_file, search, list_files); you may
run the tests (run_command) but must not change any file."""

REVIEW_COMMAND = """Hand in your verdict by running `specflux submit-review --json -` with this JSON on its standard
input: {"approved": true|false, "criteria_results": [{"criterion": "...", "met": true|false}],
"issues": [{"severity": "blocker"|"major"|"minor", "description": "..."}]}, one criteria_results
entry per acceptance criterion. It checks the JSON and tells you what to fix. Read the code and
run the tests if you like, but do not change any file and do not commit."""

REVIEW_SYSTEM = """You are the reviewer of one task of a larger project. A coding agent says the task is done; the
tests were run by the harness. Judge, criterion by criterion, whether the code in the repository
meets the task's acceptance criteria. Approve only when every criterion is met and no blocker is
left; otherwise say exactly what is missing, so that the next attempt can fix it.

## Rules

DO NOT change files. DO NOT approve on the agent's word: read the code.
DO judge each acceptance criterion separately.
DO give issues the coder can act on: file, function, what is wrong.

{handin}"""


def build_context(manager: "TaskStateManager", task_id: str, form: ContextForm = "tools",
                  role: str = "coder", extra: str = "") -> SessionContext:
    """The context of a session on `task_id`. `form` is "tools" for an agent driven through this
    package's tools (`read_file`, `check_criterion`, `end_session`...), "command" for an agent CLI
    that edits the task file itself. `role` "reviewer" asks for a verdict instead of work;
    `extra` is appended (a workflow run's account of the previous attempt, or the change to
    review)."""
    if form not in ("tools", "command"):
        raise ValueError(f"unknown context form {form!r}")
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

    if form == "tools":
        intro = [f"The task-state file is `{rel}`. Its current content, with chain inputs from upstream",
                 "tasks embedded, is below between the markers."]
        reading, system = "Read these with read_file only when you need them:", SYSTEM
    else:
        intro = [f"The task-state file is `{rel}`; this is session {fresh.last_session_number + 1}. Its current",
                 "content, with chain inputs from upstream tasks embedded, is below between the markers",
                 "(the file on disk may lack those inputs: leave them to specflux)."]
        reading, system = "Read these only when you need them:", COMMAND_SYSTEM
    if role == "reviewer":
        system = REVIEW_SYSTEM.format(handin=REVIEW_TOOLS if form == "tools" else REVIEW_COMMAND)
    lines = [
        f"# {'Review of' if role == 'reviewer' else 'Session on'} task #{task_id}: {fresh.title[1]}",
        "",
        *intro,
        "",
        "<task-state>",
        text.rstrip("\r\n"),
        "</task-state>",
    ]
    if links:
        lines += ["", reading]
        lines += [f"- `{path}`: {what}" for path, what in links]
    if extra.strip():
        lines += ["", extra.strip()]
    return SessionContext(system, "\n".join(lines), [p for p, _ in links])


def _archived_range(doc: TaskDocument) -> str:
    a = doc.archived_region
    return f"{a[0]}-{a[1]}" if a else "1-?"


def _repo_path(ws, task_file, target: str) -> str:
    """A link written in a task file, as a path from the repository root."""
    target = target.split("#", 1)[0]
    if target.startswith("/"):
        return target.lstrip("/")
    return ws.relative((task_file.parent / target).resolve())
