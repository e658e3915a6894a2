"""One agent session on one task, start to finish: context in, tools out, the progress-log entry,
completion and chain wiring, and one commit holding everything the session changed.

Whatever way a session ends (end_session, the turn limit, an API error, Ctrl-C), a session entry
is written saying so: nothing is lost.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from specflux.format.document import TaskDocument
from specflux.format.fields import format_usage
from specflux.base.errors import AgentError, SpecfluxError, UsageError
from specflux.base.files import deferred_interrupts
from specflux.format.model import SessionInput
from specflux.format.render import now_stamp
from specflux.store.manager import commit_subject
from specflux.agent.backend import SessionOutcome, SessionRequest
from specflux.agent.handoff import Handoff
from specflux.agent.context import build_context
from specflux.agent.tools import Toolbox

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.agent.backend import Backend


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
    restored: bool = False  # the agent broke or deleted its own task file, which was put back
    handoff: Handoff | None = None  # the agent's end_session (a run decides what to do with it)
    review: dict | None = None  # a reviewer session's verdict (submit_review), or None

    @property
    def ok(self) -> bool:
        return self.stop in ("end_session", "end_turn")


class TaskSide:
    """The TaskHooks of a session: ticks criteria at once, keeps the hand-off for the end."""

    def __init__(self, manager: "TaskStateManager", task_id: str):
        self.manager, self.task_id = manager, task_id
        self.handoff: Handoff | None = None
        self.review = None

    def check_criterion(self, index: int) -> str:
        self.manager.set_checked(self.task_id, [index], True)
        item = self.manager.load(self.task_id).criteria_lines[index - 1]
        return f"criterion {index} checked: {item[3]}"

    def submit_review(self, review) -> str:
        """Refused unless it judges each of this task's own criteria (by number or exact text)."""
        from specflux.agent.handin import check_judged

        check_judged(review, [item[3] for item in self.manager.load(self.task_id).criteria_lines])
        self.review = review
        return "review recorded; stop now"

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
    say: Callable[[str], None] | None = None,
    role: str = "coder",
    extra_context: str = "",
    trailers: dict[str, str] | None = None,
    complete_on_handoff: bool = True,
    handin: Path | None = None,
    baseline_path: Path | None = None,
    guard: bool = False,
) -> SessionReport:
    """Run one session. `edits_task_file` is for agents that follow the protocol by editing the
    task file themselves (agent CLIs): they get the context written for that, and their file is
    linted before anything is committed. `say` prints a line at once (default: stderr). `guard`
    (workflow runs): other tasks' files and the workspace's settings the agent changed are put back
    before the commit (`protected.py`).

    For workflow runs: `role` "reviewer" gives the agent read-only tools and `submit_review`
    (an agent CLI hands in through `specflux submit-review`, written to `handin`), and records
    its verdict as the session entry; `extra_context` is appended to the context; `trailers` go
    into the commit; `complete_on_handoff=False` leaves completing the task to the run (the
    hand-off is in the report).

    Everything that can be checked before the agent starts is (a broken task file, a backend that
    cannot start, a git operation in progress, an unavailable sandbox): such a mistake raises
    before any file changes. After the agent stops, every task file it broke or deleted is put
    back as it was, the session entry is written, and one commit holds the session's changes and
    none of the user's own uncommitted work.
    """
    say = say or (lambda line: print(f"specflux: {line}", file=sys.stderr))
    cfg = manager.ws.config.agent
    doc = manager.load(task_id)  # a broken file stops here, before anything runs
    preflight = getattr(backend, "preflight", None)
    if preflight is not None:
        preflight()
    git = manager.git if commit else None
    early_notices = git.check_can_commit() if git is not None else []
    sandbox = None
    if not edits_task_file or role == "reviewer":
        from specflux.agent.sandbox import choose

        sandbox = choose(cfg.sandbox)
        if sandbox.warning:
            say(sandbox.warning)
    for line in early_notices:
        say(line)
    baseline = git.capture() if git is not None else None
    if baseline is not None and baseline_path is not None:  # a run commits a crashed session with it
        from specflux.base.files import atomic_write
        import json

        atomic_write(baseline_path, json.dumps(baseline.to_json()))
    task_files = _task_files(manager)
    guarded = None
    if guard:  # a run's agent writes only its task: the rest of the workspace as it is now
        from specflux.agent.protected import snapshot

        guarded = snapshot(manager)
    entries_before = Counter(number for number, _, _ in doc.session_regions)  # whose entries are whose, at the end
    start_status = "review" if role == "reviewer" else ("in_progress" if doc.status == "pending" else None)
    if start_status and doc.status != start_status:
        manager.set_status(task_id, start_status)
    ctx = build_context(manager, task_id, form="command" if edits_task_file or handin else "tools", role=role,
                        extra=extra_context)
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
    toolbox = Toolbox(manager.ws.root, side, command_timeout_s=cfg.command_timeout_s, read_only=protected,
                      sandbox=sandbox, **({"role": role} if role != "coder" else {}))
    started = time.monotonic()
    try:
        outcome = backend.run(request, toolbox)
    except KeyboardInterrupt:
        outcome = SessionOutcome(stop="interrupted", error="interrupted by the user")
    except SpecfluxError as e:
        outcome = SessionOutcome(stop="error", error=str(e))
    finally:
        toolbox.close()
    outcome.duration_ms = outcome.duration_ms or int((time.monotonic() - started) * 1000)
    report = SessionReport(task_id, outcome.stop, error=outcome.error, outcome=outcome)
    report.notices += early_notices
    with deferred_interrupts():  # the agent has stopped: what it did is written down in full
        hand: set[str] = set()  # the entries a person logged meanwhile
        if edits_task_file and role != "reviewer":
            hand = _number_agents_entries(manager, task_id, entries_before, baseline, report)
        restored = _restore_broken(manager, task_files, report, baseline)
        if guarded is not None:
            from specflux.store.lint import lint_document
            from specflux.agent.protected import put_back

            report.notices += put_back(manager, task_id, task_files, guarded,
                                       lambda path, old: _good_version(manager, path, old, baseline, lint_document))
        if sandbox is not None and not sandbox.confined and sandbox.name != "off":
            report.notices.append(sandbox.describe())
        touched: list[Path] = list(restored)
        if role == "reviewer" and git is not None:
            _undo_changes(manager, git, baseline, report)
        if role == "reviewer":
            report.review = side.review or getattr(toolbox, "review", None) or _read_handin(handin)
            touched += _record_review(manager, task_id, report, outcome, clock)
        elif edits_task_file:
            touched += _settle_agent_edits(manager, task_id, entries_before, hand, outcome, clock, report,
                                           complete_on_handoff)
        else:
            touched += _record(manager, task_id, side, outcome, clock, report, sandbox, complete_on_handoff)
        if git is not None and report.session is not None:
            _commit(manager, git, baseline, task_id, side, outcome, report, trailers)
        elif commit and git is None and report.session is not None:
            report.notices.append("not a git repository: specflux works, but does not commit")
    return report


def _undo_changes(manager, git, baseline, report: "SessionReport") -> None:
    """A reviewer's tools are read-only (CONTRACT section 4), but its commands run in a sandbox
    that may write in the repository: whatever it changed is put back and never committed."""
    from specflux.vcs.process import run_git
    from specflux.vcs.status import changed_paths

    states = manager.ws.relative(manager.ws.states_dir)
    for rel in changed_paths(baseline.fingerprints, git.status_snapshot()):
        path = git.root / rel
        if manager.ws.relative(path).startswith(states + "/"):
            continue  # task files: linted and put back by _restore_broken
        before = baseline.dirty.get(rel)
        if before is not None and before.content is None:
            report.notices.append(f"{rel}: the reviewer changed it and it could not be put back (it was "
                                  "already changed before the review); check it")
            continue
        from specflux.agent.protected import keep_copy

        kept = keep_copy(manager, path) if path.is_file() else ""  # a person's edit meanwhile is never lost
        if before is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(before.content)
        elif run_git(("cat-file", "-e", f"HEAD:{rel}"), git.root).returncode == 0:
            run_git(("checkout", "-q", "HEAD", "--", rel), git.root)
        else:
            path.unlink(missing_ok=True)
        report.notices.append(f"{rel}: changed during the review; put back as it was (a review changes no file){kept}")


def _read_handin(path: Path | None) -> dict | None:
    """The verdict an agent CLI handed in with `specflux submit-review` (checked again: the agent
    could have written the file itself), or None."""
    if path is None:
        return None
    from specflux.agent.handin import HandinError, read_handin

    try:
        found = read_handin(path, "review")
    except HandinError:
        return None
    return found["data"] if found else None


def _plain_review(review) -> dict:
    """A verdict (a pydantic model from the tool, or a dict from a hand-in) as a plain dict."""
    data = review.model_dump() if hasattr(review, "model_dump") else dict(review)
    return {
        "approved": bool(data.get("approved")),
        "issues": [dict(i) for i in data.get("issues", [])],
        "criteriaResults": [dict(c) for c in data.get("criteria_results", data.get("criteriaResults", []))],
    }


def _record_review(manager, task_id, report, outcome, clock) -> list[Path]:
    """A reviewer session's entry: its verdict, criterion by criterion, and its issues."""
    if report.review is not None:
        report.review = _plain_review(report.review)
        review = report.review
        met = sum(1 for c in review["criteriaResults"] if c.get("met"))
        verdict = "approved" if review["approved"] else "changes requested"
        did = [f"Review: {verdict} ({met}/{len(review['criteriaResults'])} criteria met)"]
        did += [f"{'met' if c.get('met') else 'NOT met'}: {c.get('criterion')}" for c in review["criteriaResults"]]
        issues = "\n".join(f"- [{i.get('severity')}] {i.get('description')}" for i in review["issues"]) or "None"
        entry = SessionInput(did=did, issues=issues, next="Accept the task." if review["approved"]
                             else "Fix the issues above, then review again.", timestamp=clock())
    else:
        entry = _entry(None, outcome, clock())
        entry.did = [f"Review ended without a verdict: {entry.did[0]}"]
        if report.stop == "end_turn":
            report.stop = "error"
        report.error = report.error or "the reviewer handed in no verdict"
    usage = outcome.usage
    line = format_usage(usage.input_tokens, usage.output_tokens,
                        usage.cache_read_input_tokens, usage.cache_creation_input_tokens)
    done = manager.append_session(task_id, entry, commit=False, usage_line=line)
    report.session, report.status = done.session, done.status
    report.notices += done.notices
    return list(done.changed)


def _record(manager, task_id, side, outcome, clock, report, sandbox, complete_on_handoff=True) -> list[Path]:
    """The session entry (and the completion, when the agent handed over a chain output) of a
    session whose agent changed the task through its tools."""
    handoff = side.handoff or outcome.handoff
    report.handoff = handoff
    usage = outcome.usage
    line = format_usage(usage.input_tokens, usage.output_tokens,
                        usage.cache_read_input_tokens, usage.cache_creation_input_tokens)
    entry = _entry(handoff, outcome, clock())
    if sandbox is not None and sandbox.warning:
        entry.issues = f"{entry.issues}\n\n{sandbox.warning}".strip() if entry.issues else sandbox.warning
    done = manager.append_session(task_id, entry, commit=False, usage_line=line)
    report.session, report.status = done.session, done.status
    report.notices += done.notices
    report.archived += done.archived
    touched = list(done.changed)
    if handoff is not None and handoff.chain_output is not None and complete_on_handoff:
        completed = manager.complete(task_id, handoff.chain_output.summary,
                                     handoff.chain_output.downstream or None, commit=False)
        report.status, report.wired = "complete", completed.wired
        report.notices += completed.notices
        touched += completed.changed
    return touched


def _commit(manager, git, baseline, task_id, side, outcome, report, extra=None) -> None:
    """One commit with what the session changed, leaving the user's own uncommitted work alone."""
    first = _first_did(manager, task_id, side.handoff, report.session) or f"ended: {outcome.stop}"
    done = git.commit_session(baseline, None, commit_subject(task_id, report.session, first),
                              {**_trailers(task_id, report, outcome), **(extra or {})})
    report.commit = done.sha
    report.changed = list(done.paths)
    report.notices += done.notes


def _task_files(manager) -> dict[Path, bytes]:
    """Every task file's bytes before a session, to put back any the session breaks."""
    out = {}
    for task_id in manager.ws.task_ids():
        path = manager.ws.task_path(task_id)
        try:
            out[path] = path.read_bytes()
        except OSError:
            continue  # unreadable (a folder, no permission): nothing to put back
    return out


def _restore_broken(manager, before: dict[Path, bytes], report: "SessionReport", baseline=None) -> list[Path]:
    """Put back every task file the session deleted or left unreadable (and remove any new one
    that cannot be read), saying so; returns the paths put back. A file someone committed while
    the session ran (a person's `specflux session`) is put back with that commit in it."""
    from specflux.base.files import atomic_write
    from specflux.store.lint import lint_document
    from specflux.store.workspace import STATE_FILE

    now = {manager.ws.task_path(t) for t in manager.ws.task_ids()}
    restored = []
    for path in sorted(set(before) | now):
        rel = manager.ws.relative(path)
        old = before.get(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError:
            continue
        if data == old:
            continue
        problems = ["the session deleted it"] if data is None else _problems(manager, path, data, lint_document)
        if not problems:
            continue
        if old is None:
            path.unlink(missing_ok=True)
            report.notices.append(f"{rel}: the session left a new task file that cannot be read; removed it: {problems[0]}")
        else:
            good = _good_version(manager, path, old.decode("utf-8"), baseline, lint_document)
            atomic_write(path, good)
            meanwhile = " (with what was committed to it meanwhile)" if good != old.decode("utf-8") else ""
            report.notices.append(f"{rel}: the session broke this task file ({problems[0]}); put it back as it "
                                  f"was before the session{meanwhile}, and left it out of the commit")
        m = STATE_FILE.fullmatch(path.name)
        if m and m.group(1) == report.task_id:
            report.restored = True
        restored.append(path)
    return restored


def _problems(manager, path: Path, data: bytes, lint_document) -> list[str]:
    """Why a task file cannot be used (the errors lint finds in it), or []."""
    from specflux.base.files import decode
    from specflux.store.workspace import STATE_FILE

    rel = manager.ws.relative(path)
    try:
        doc = TaskDocument(decode(data, rel), rel)
    except SpecfluxError as e:
        return [str(e)]
    m = STATE_FILE.fullmatch(path.name)
    return [str(p) for p in lint_document(doc, m.group(1) if m else None, manager.ws.config.archive)
            if p.severity == "error" and "total_sessions" not in p.message]


def _good_version(manager, path: Path, before: str, baseline, lint_document) -> str:
    """What a task file the session broke is put back to: as it was before the session, plus what
    was committed to it while the session ran (a person's `specflux session`), merged by parts;
    HEAD's version where that merge is not clean."""
    git = manager.git
    if baseline is None or git is None:
        return before
    try:
        base, head = git.committed_text(path, baseline.head) if baseline.head else "", git.committed_text(path)
    except SpecfluxError:
        return before
    if head is None or head == base:
        return before  # nothing committed meanwhile
    from specflux.format.merge import merge_task

    merged, clean = merge_task(base or "", before, head)
    for text in ((merged,) if clean else ()) + (head,):
        if not _problems(manager, path, text.encode("utf-8"), lint_document):
            return text
    return before


def _first_did(manager, task_id: str, handoff: Handoff | None, number: int | None = None) -> str | None:
    """The first thing the session did: its hand-off's, or its own entry's (`number`)."""
    if handoff is not None:
        return handoff.did[0]
    sessions = manager.load(task_id).sessions()
    mine = [s for s in sessions if s.number == number] or sessions[-1:]
    return mine[-1].did[0] if mine and mine[-1].did else None


def _entry_key(text: str) -> str:
    """A session entry's text, compared across versions of the file (line endings, trailing space)."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().splitlines())


def _hand_entries(manager, task_id: str, baseline) -> set[str]:
    """The entries (`_entry_key`) a person logged for the task while the session ran: committed
    meanwhile by `specflux session` (a commit titled with the entry's number). An agent CLI does
    not commit, so these are never its own."""
    git = manager.git
    if baseline is None or git is None:
        return set()
    path = manager.path(task_id)
    try:
        numbers = set()
        for c in git.commits_since(baseline.head, [path]):
            m = re.match(rf"task {re.escape(task_id)}: session (\d+) — ", c.subject)
            if m and c.trailers.get("Specflux-Session") == m.group(1):
                numbers.add(int(m.group(1)))
        text = git.committed_text(path) if numbers else None
        if text is None:
            return set()
        doc = TaskDocument(text, manager.ws.relative(path))
        return {_entry_key(doc.text[r.start:r.end]) for n, _, r in doc.session_regions if n in numbers}
    except SpecfluxError:
        return set()


def _agents_entries(doc: TaskDocument, before: Counter, hand: set[str]) -> list:
    """(number, region) of each entry of `doc` the agent wrote: not there when the session started
    (`before`: how many entries had each number then) and not a person's (`hand`)."""
    left = Counter(before)
    out = []
    for number, _, region in doc.session_regions:
        if left[number] > 0:
            left[number] -= 1
        elif _entry_key(doc.text[region.start:region.end]) not in hand:
            out.append((number, region))
    return out


def _number_agents_entries(manager, task_id: str, before: Counter, baseline, report: "SessionReport") -> set[str]:
    """An agent CLI numbers its entry as its context said when it started; a person who logged a
    session meanwhile has taken that number. The agent's entries are numbered after every other
    entry (in the order they are written), so that no number is used twice. Returns the entries
    a person logged meanwhile (`_hand_entries`, read under the task's lock)."""
    from specflux.format.edits import Edit, apply_edits
    from specflux.format.outline import content_end
    from specflux.store.values import Outcome

    hand: set[str] = set()
    try:
        with manager.changing([task_id], Outcome(task_id)) as pending:
            hand = _hand_entries(manager, task_id, baseline)
            doc = manager.load(task_id)
            agents = _agents_entries(doc, before, hand)
            ours = {region.start for _, region in agents}
            others = [n for n, _, region in doc.session_regions if region.start not in ours]
            if doc.archived_region:
                others.append(doc.archived_region[1])
            top = max(others, default=0)
            numbers = [n for n, _ in agents]
            if not agents or (min(numbers) > top and numbers == sorted(set(numbers))):
                return hand
            edits = []
            for number, region in agents:
                top += 1
                if number == top:
                    continue
                line = doc.text[region.start:content_end(doc.text, region.start)]
                new = re.sub(r"(session\s*#?\s*)\d+", lambda m, n=top: f"{m.group(1)}{n}", line, count=1,
                             flags=re.I)
                edits.append(Edit(region.start, region.start + len(line), new))
                report.notices.append(f"the agent numbered its entry session {number}, a number the progress log "
                                      f"already has (a session logged meanwhile): it is session {top}")
            text = apply_edits(doc.text, edits)
            if [n for n, _, _ in TaskDocument(text, doc.path).session_regions] == \
                    [n for n, _, _ in doc.session_regions]:
                return hand  # nothing could be rewritten
            pending.files.write(manager.path(task_id), text)
    except SpecfluxError:
        pass  # a file the agent broke is put back by _restore_broken
    return hand


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


def _settle_agent_edits(manager, task_id, before, hand, outcome, clock, report, complete=True) -> list[Path]:
    """After an agent CLI edited the task file itself (a broken one was already put back by
    `_restore_broken`): add what it forgot, complete it. Its entry is the one it wrote (told apart
    from a person's logged meanwhile by content), else one written for it now, numbered after
    every entry the file has at the end."""
    from specflux.store.chain import dependents, upstream_from, wire_dependents

    path = manager.path(task_id)
    doc = manager.load(task_id)
    if report.restored:
        report.stop = "error"
        report.error = "the agent left the task file broken; it was put back as it was before the session"
        outcome.error = report.error
    touched: list[Path] = []
    agents = _agents_entries(doc, before, hand)
    if agents:
        number = agents[-1][0]
    else:
        done = manager.append_session(task_id, _entry(None, outcome, clock()), commit=False)
        touched += done.changed
        number = done.session
        doc = manager.load(task_id)
    fixes = {}
    if doc.metadata.get("total_sessions") != doc.session_count:
        fixes["total_sessions"] = doc.session_count
        report.notices.append(f"set total_sessions to {doc.session_count} to match the progress log")
    all_checked = bool(doc.criteria_lines) and all(item[2] for item in doc.criteria_lines)
    if complete and all_checked and not doc.chain_output_is_placeholder and doc.status != "complete":
        fixes["status"] = "complete"
    if not complete:  # in a run the workflow accepts the task, not the agent
        out = doc.chain_output()
        if out is not None and out.summary:
            from specflux.agent.handoff import ChainOutputIn

            last = next((s for s in reversed(doc.sessions()) if s.number == number), None)
            report.handoff = Handoff(did=(last.did if last and last.did else ["(see the task file)"]),
                                     chain_output=ChainOutputIn(summary=out.summary, downstream=out.downstream))
        if doc.status == "complete":
            fixes["status"] = "in_progress"
            report.notices.append("the agent marked the task complete; in a run, the workflow decides that")
    touched += _set_metadata(manager, task_id, fixes)
    doc = manager.load(task_id)
    report.session, report.status = number, doc.status
    touched.append(path)
    if doc.status == "complete":
        from specflux.store.values import Outcome

        targets = dependents(manager, task_id)
        wiring = Outcome(task_id)
        with manager.changing(targets, wiring) as pending:
            report.wired = wire_dependents(manager, upstream_from(task_id, manager.load(task_id)), targets, pending.files)
        touched += wiring.changed
    return touched


def _set_metadata(manager, task_id, updates) -> list[Path]:
    if not updates:
        return []
    from specflux.store.values import Outcome

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
        from specflux.agent.command_backend import CommandBackend

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
        from specflux.agent.anthropic_backend import replay_backend

        return replay_backend(recording), False
    from specflux.agent.anthropic_backend import live_backend

    recording = new_recording_path(manager.ws.recordings_dir, args.id)
    return live_backend(recording, task_id=args.id), False


def new_recording_path(folder: Path, task_id: str) -> Path:
    """`task-<id>-<time>.jsonl`, claimed atomically so that two sessions never share a file."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise AgentError("is a file where specflux keeps its recordings folder; move it away", folder) from None
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
