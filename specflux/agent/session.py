"""One agent session on one task, start to finish: context in, tools out, the progress-log entry,
completion and chain wiring, and one commit holding everything the session changed.

Whatever way a session ends (end_session, the turn limit, an API error, Ctrl-C), a session entry
is written saying so: nothing is lost.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..document import TaskDocument, format_usage
from ..errors import AgentError, SpecfluxError, UsageError
from ..model import SessionInput
from ..render import now_stamp
from ..store import commit_subject
from .backend import Handoff, SessionOutcome, SessionRequest
from .context import build_context
from .tools import Toolbox

if TYPE_CHECKING:
    from ..store import TaskStateManager
    from .backend import Backend


@dataclass
class SessionReport:
    task_id: str
    stop: str
    session: int | None = None
    error: str | None = None
    status: str | None = None
    commit: str = ""
    changed: list[str] = field(default_factory=list)
    wired: list[str] = field(default_factory=list)
    outcome: SessionOutcome | None = None
    notices: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.stop in ("end_session", "end_turn")


class TaskSide:
    """The TaskHooks of a session: ticks criteria at once, keeps the hand-off for the end."""

    def __init__(self, manager: "TaskStateManager", task_id: str):
        self.manager, self.task_id = manager, task_id
        self.handoff: Handoff | None = None

    def check_criterion(self, index: int) -> str:
        self.manager.set_checked(self.task_id, [index], True)
        item = self.manager.load(self.task_id).criteria_lines[index - 1]
        return f"criterion {index} checked: {item[3]}"

    def end_session(self, handoff: Handoff) -> str:
        if handoff.chain_output is not None:
            open_items = [str(i) for i, _, checked, _, _ in self.manager.load(self.task_id).criteria_lines if not checked]
            if open_items:
                raise AgentError(
                    f"criteria {', '.join(open_items)} are not checked yet: check them (after testing) before "
                    "handing over a chain output, or end the session without chain_output"
                )
        self.handoff = handoff
        return "session recorded; stop now"


def run_session(
    manager: "TaskStateManager",
    task_id: str,
    backend: "Backend",
    *,
    model: str | None = None,
    max_turns: int | None = None,
    token_budget: int | None = None,
    commit: bool = True,
    clock: Callable[[], str] = now_stamp,
    edits_task_file: bool = False,
) -> SessionReport:
    """Run one session. `edits_task_file` is for agents that follow the protocol by editing the
    task file themselves (agent CLIs): their file is linted before anything is committed."""
    cfg = manager.ws.config.agent
    doc = manager.load(task_id)  # a broken file stops here, before anything runs
    git = manager.git if commit else None
    before = git.status_snapshot() if git else {}
    sessions_before = doc.session_count
    if doc.status == "pending":
        manager.set_status(task_id, "in_progress")
    ctx = build_context(manager, task_id)
    request = SessionRequest(
        system=ctx.system,
        context=ctx.user,
        model=model or cfg.model,
        max_turns=max_turns or cfg.max_turns,
        token_budget=token_budget or cfg.token_budget,
        max_tokens=cfg.max_tokens,
        task_id=task_id,
    )
    side = TaskSide(manager, task_id)
    protected = () if edits_task_file else (manager.ws.relative(manager.ws.dir),)
    toolbox = Toolbox(manager.ws.root, side, command_timeout_s=cfg.command_timeout_s, read_only=protected)
    started = time.monotonic()
    try:
        outcome = backend.run(request, toolbox)
    except KeyboardInterrupt:
        outcome = SessionOutcome(stop="interrupted", error="interrupted by the user")
    except SpecfluxError as e:
        outcome = SessionOutcome(stop="error", error=str(e))
    outcome.duration_ms = outcome.duration_ms or int((time.monotonic() - started) * 1000)
    report = SessionReport(task_id, outcome.stop, error=outcome.error, outcome=outcome)

    touched: list[Path] = []
    if edits_task_file:
        touched += _settle_agent_edits(manager, task_id, sessions_before, outcome, clock, report)
    else:
        handoff = side.handoff or outcome.handoff
        usage = outcome.usage
        line = format_usage(usage.input_tokens, usage.output_tokens,
                            usage.cache_read_input_tokens, usage.cache_creation_input_tokens)
        entry = _entry(handoff, outcome, clock())
        done = manager.append_session(task_id, entry, commit=False, usage_line=line)
        report.session, report.status = done.session, done.status
        report.notices += done.notices
        report.archived += done.archived
        touched += done.changed
        if handoff is not None and handoff.chain_output is not None:
            completed = manager.complete(task_id, handoff.chain_output.summary, handoff.chain_output.downstream, commit=False)
            report.status, report.wired = "complete", completed.wired
            touched += completed.changed

    if git is not None and report.session is not None:
        after = git.status_snapshot()
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        paths = sorted({*(git.root / p for p in changed), *touched})
        report.changed = [manager.ws.relative(p) for p in paths]
        first = _first_did(manager, task_id, side.handoff) or f"ended: {outcome.stop}"
        report.commit = git.commit(paths, commit_subject(task_id, report.session, first), _trailers(task_id, report, outcome))
    elif commit and git is None and report.session is not None:
        report.notices.append("not a git repository: specflux works, but does not commit")
    return report


def _first_did(manager, task_id: str, handoff: Handoff | None) -> str | None:
    if handoff is not None:
        return handoff.did[0]
    sessions = manager.load(task_id).sessions()
    return sessions[-1].did[0] if sessions and sessions[-1].did else None


def _entry(handoff: Handoff | None, outcome: SessionOutcome, stamp: str) -> SessionInput:
    if handoff is not None:
        return SessionInput(did=handoff.did, issues=handoff.issues, next=handoff.next, timestamp=stamp)
    why = {
        "max_turns": "the session reached its turn limit",
        "token_budget": "the session spent its token budget",
        "interrupted": "the session was interrupted",
        "error": f"the session stopped on an error: {outcome.error}",
        "end_turn": "the agent stopped without calling end_session",
    }.get(outcome.stop, f"the session ended ({outcome.stop})")
    return SessionInput(
        did=[f"Session ended without a hand-off: {why}"],
        issues=outcome.error or "No end_session: the agent's own account of this session is missing.",
        next="Check the working tree for partial changes, then continue from the last hand-off.",
        timestamp=stamp,
    )


def _trailers(task_id: str, report: SessionReport, outcome: SessionOutcome) -> dict[str, str]:
    u = outcome.usage
    return {
        "Specflux-Task": task_id,
        "Specflux-Session": str(report.session),
        "Specflux-Status": report.status or "",
        "Specflux-Stop": outcome.stop,
        "Specflux-Duration-Ms": str(outcome.duration_ms),
        "Specflux-Input-Tokens": str(u.input_tokens),
        "Specflux-Output-Tokens": str(u.output_tokens),
        "Specflux-Cache-Read-Tokens": str(u.cache_read_input_tokens),
        "Specflux-Cache-Write-Tokens": str(u.cache_creation_input_tokens),
    }


def _settle_agent_edits(manager, task_id, sessions_before, outcome, clock, report) -> list[Path]:
    """After an agent CLI edited the task file itself: lint it, add what it forgot, complete it."""
    from ..chain import dependents, upstream_from, wire_dependents
    from ..files import read_text
    from ..lint import lint_document

    path = manager.path(task_id)
    doc = TaskDocument(read_text(path, manager.ws.relative(path)), manager.ws.relative(path))
    problems = [p for p in lint_document(doc, task_id, manager.ws.config.archive)
                if p.severity == "error" and "total_sessions" not in p.message]
    if problems:
        report.stop, report.error = "error", "the agent left the task file broken; nothing was committed:\n" + "\n".join(map(str, problems))
        return []
    touched: list[Path] = []
    if doc.session_count == sessions_before:
        done = manager.append_session(task_id, _entry(None, outcome, clock()), commit=False)
        touched += done.changed
        doc = manager.load(task_id)
    fixes = {}
    if doc.metadata.get("total_sessions") != doc.session_count:
        fixes["total_sessions"] = doc.session_count
        report.notices.append(f"set total_sessions to {doc.session_count} to match the progress log")
    all_checked = bool(doc.criteria_lines) and all(item[2] for item in doc.criteria_lines)
    if all_checked and not doc.chain_output_is_placeholder and doc.status != "complete":
        fixes["status"] = "complete"
    touched += _set_metadata(manager, task_id, fixes)
    doc = manager.load(task_id)
    report.session, report.status = doc.last_session_number, doc.status
    touched.append(path)
    if doc.status == "complete":
        from ..store import Outcome

        targets = dependents(manager, task_id)
        wiring = Outcome(task_id)
        with manager.changing(targets, wiring) as pending:
            report.wired = wire_dependents(manager, upstream_from(task_id, manager.load(task_id)), targets, pending.files)
        touched += wiring.changed
    return touched


def _set_metadata(manager, task_id, updates) -> list[Path]:
    if not updates:
        return []
    from ..store import Outcome

    outcome = Outcome(task_id)
    with manager.changing([task_id], outcome) as pending:
        pending.files.write(manager.path(task_id), manager.load(task_id).set_metadata(updates))
    return outcome.changed


# --------------------------------------------------------------------- the command line


def backend_from_args(manager: "TaskStateManager", args) -> tuple["Backend", bool]:
    """The backend `specflux run` asked for, and whether it edits the task file itself."""
    if args.agent == "command":
        if not args.cmd:
            raise UsageError("--agent command needs --cmd \"the agent command line\"")
        from .command_backend import CommandBackend

        path = manager.path(args.id)
        env = {"SPECFLUX_TASK_FILE": str(path), "SPECFLUX_TASK_ID": args.id, "SPECFLUX_ROOT": str(manager.ws.root)}
        timeout = args.timeout or manager.ws.config.agent.session_timeout_s
        return CommandBackend(args.cmd, timeout_s=timeout, env=env), True
    if args.agent == "replay":
        if not args.recording:
            raise UsageError("--agent replay needs --recording PATH")
        recording = Path(args.recording)
        if not recording.is_file():
            raise UsageError(f"no recording at {recording}")
        from .anthropic_backend import replay_backend

        return replay_backend(recording), False
    from .anthropic_backend import live_backend

    recording = new_recording_path(manager.ws.recordings_dir, args.id)
    return live_backend(recording, task_id=args.id), False


def new_recording_path(folder: Path, task_id: str) -> Path:
    """`task-<id>-<time>.jsonl`, claimed atomically so that two sessions never share a file."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        path = folder / (f"task-{task_id}-{stamp}.jsonl" if n == 1 else f"task-{task_id}-{stamp}-{n}.jsonl")
        try:
            with open(path, "x"):
                return path
        except FileExistsError:
            continue
    raise AgentError(f"cannot find a free recording name in {folder}")


def run_from_args(manager: "TaskStateManager", args) -> int:
    backend, edits = backend_from_args(manager, args)
    report = run_session(
        manager,
        args.id,
        backend,
        model=args.model,
        max_turns=args.max_turns,
        token_budget=args.token_budget,
        commit=not args.no_commit,
        edits_task_file=edits,
    )
    for note in report.notices:
        print(f"specflux: {note}", file=sys.stderr)
    print(describe(report))
    if report.error:
        print(f"specflux: {report.error}", file=sys.stderr)
    if report.stop == "interrupted":
        return 130
    return 0 if report.ok else 1


def describe(report: SessionReport) -> str:
    o = report.outcome
    lines = [f"task {report.task_id}: session {report.session or '-'} ended ({report.stop}), status {report.status or '-'}"]
    if o is not None:
        u = o.usage
        lines.append(f"  {o.turns} turn(s), {o.duration_ms / 1000:.1f} s, tokens: {u.input_tokens} input, "
                     f"{u.output_tokens} output, {u.cache_read_input_tokens} cache-read")
        if o.recording:
            lines.append(f"  recording: {o.recording}")
    if report.commit:
        lines.append(f"  commit {report.commit[:8]}: {len(report.changed)} file(s)")
    for target in report.wired:
        lines.append(f"  wired into task {target}")
    return "\n".join(lines)
