"""One agent session on one task, start to finish: context in, tools out, the progress-log entry,
completion and chain wiring, and one commit holding everything the session changed.

Whatever way a session ends (end_session, the turn limit, an API error, Ctrl-C), a session entry
is written saying so: nothing is lost.

Before the agent starts, everything that can be checked is; after it stops, restore.py puts back
what it must not leave behind, progress_entry.py writes its entry, and the commit is made here.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from specflux.base.errors import AgentError, SpecfluxError, UsageError
from specflux.base.files import deferred_interrupts, watching_writes
from specflux.format.render import now_stamp
from specflux.store.manager import commit_subject
from specflux.agent.backend import SessionOutcome, SessionRequest, Usage
from specflux.agent.restore import good_version, restore_broken, task_file_bytes, undo_changes
from specflux.agent.session_report import SessionReport
from specflux.agent.context import build_context
from specflux.agent.pricing import Pricing, format_cost
from specflux.agent.tools import Toolbox

if TYPE_CHECKING:
    from specflux.agent.handoff import Handoff
    from specflux.store.manager import TaskStateManager
    from specflux.agent.backend import Backend
    from specflux.agent.handin_channel import HandinChannel


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
        from specflux.agent.handin_rules import judges  # (without pydantic: the verdict may be a PlainReview)

        criteria = [item[3] for item in self.manager.load(self.task_id).criteria_lines]
        judges([r.criterion for r in review.criteria_results], criteria)
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
    budget_usd: float | None = None,
    commit: bool = True,
    clock: Callable[[], str] = now_stamp,
    edits_task_file: bool = False,
    say: Callable[[str], None] | None = None,
    role: str = "coder",
    extra_context: str = "",
    trailers: dict[str, str] | None = None,
    complete_on_handoff: bool = True,
    handin: "HandinChannel | None" = None,
    baseline_path: Path | None = None,
    guard: bool = False,
    before_commit: Callable[[SessionReport], list[Path] | None] | None = None,
    known_status: tuple[str, dict] | None = None,
) -> SessionReport:
    """Run one session. `edits_task_file` is for agents that follow the protocol by editing the
    task file themselves (agent CLIs): they get the context written for that, and their file is
    linted before anything is committed. `say` prints a line at once (default: stderr). `guard`
    (workflow runs): other tasks' files and the workspace's settings the agent changed are put back
    before the commit (`protected.py`). `before_commit` (a run's reviewer): called with the report
    once the review's entry is written; the files it then wrote that go into the commit (the
    task's completion: flow/early_acceptance.py), or None. `known_status`: the work tree's status
    as the caller knows it (a run's session right after the one before: its `report.after`, where
    nothing ran between), for the baseline instead of asking git.

    For workflow runs: `role` "reviewer" gives the agent read-only tools and `submit_review`
    (an agent CLI hands in through `specflux submit-review`, to its step's channel `handin`), and records
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
    baseline = git.capture(known_status) if git is not None else None
    if baseline is not None and baseline_path is not None:  # a run commits a crashed session with it
        from specflux.base.files import atomic_write
        import json

        atomic_write(baseline_path, json.dumps(baseline.to_json()), sync=False)  # (a power cut redoes the step)
    task_files = task_file_bytes(manager, baseline, task_id)
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
        budget_usd=budget_usd,
        pricing=Pricing(manager.ws.config.pricing),
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
    except KeyboardInterrupt:  # the backend said nothing of what it spent: unknown, not 0
        outcome = SessionOutcome(stop="interrupted", error="interrupted by the user", usage=Usage.unknown())
    except SpecfluxError as e:
        outcome = SessionOutcome(stop="error", error=str(e), usage=Usage.unknown())
    finally:
        toolbox.close()
    outcome.duration_ms = outcome.duration_ms or int((time.monotonic() - started) * 1000)
    # (what writes the session's entry: imported once its agent has stopped, not on the way to it)
    from specflux.agent.progress_entry import (handed_in_review, number_agents_entries, record_entry, record_review,
                                               settle_agent_edits)

    request.pricing.priced(outcome.usage)
    _say_uncounted(outcome.usage, request, say)
    report = SessionReport(task_id, outcome.stop, error=outcome.error, outcome=outcome)
    report.notices += early_notices
    with deferred_interrupts():  # the agent has stopped: what it did is written down in full
        # the work tree's status is read while specflux writes its own part (on the other core), then
        # stands for now with those writes added; where specflux put back files, it is read again
        soon = git.status_soon() if git is not None else None
        try:
            with watching_writes() as wrote:
                hand: set[str] = set()  # the entries a person logged meanwhile
                if edits_task_file and role != "reviewer":
                    hand = number_agents_entries(manager, task_id, entries_before, baseline, report)
                moved = bool(restore_broken(manager, task_files, report, baseline,
                                            held=getattr(backend, "held_read_only", frozenset())))
                if guarded is not None:
                    from specflux.store.lint import lint_document
                    from specflux.agent.protected import put_back

                    undone = put_back(manager, task_id, task_files, guarded,
                                      lambda path, old: good_version(manager, path, old, baseline, lint_document))
                    report.notices += undone
                    moved = moved or bool(undone)
                if sandbox is not None and not sandbox.confined and sandbox.name != "off":
                    report.notices.append(sandbox.describe())
                seen = None  # the status the commit reads (None: it asks git)
                if role == "reviewer" and git is not None:  # its undo check reads it too
                    seen = git.status() if moved else _as_now(soon, manager, git, wrote)
                    if undo_changes(manager, git, baseline, report, seen):
                        moved, seen = True, None  # it put files back: the commit reads the status again
                if role == "reviewer":
                    report.review = side.review or getattr(toolbox, "review", None) or handed_in_review(handin)
                    seen = _with_written(seen, git, record_review(manager, task_id, report, outcome, clock))
                    more = before_commit(report) if before_commit is not None and report.session is not None else None
                    if more is not None:  # (the task's completion: into this commit)
                        report.status = manager.load(task_id).status
                        seen = _with_ours(seen, manager, git, more)
                elif edits_task_file:
                    settle_agent_edits(manager, task_id, entries_before, hand, outcome, clock, report,
                                       complete_on_handoff)
                else:
                    record_entry(manager, task_id, side, outcome, clock, report, sandbox, complete_on_handoff)
            if role != "reviewer" and soon is not None and not moved:
                seen = _as_now(soon, manager, git, wrote)
        finally:
            if soon is not None:  # (its process is waited for whatever happened)
                with contextlib.suppress(SpecfluxError):
                    soon()
        if git is not None and report.session is not None:
            _commit(manager, git, baseline, task_id, side, outcome, report, trailers, status=seen)
        elif commit and git is None and report.session is not None:
            report.notices.append("not a git repository: specflux works, but does not commit")
    return report


def _say_uncounted(usage: Usage, request: SessionRequest, say: Callable[[str], None]) -> None:
    """A session whose usage is unknown: why, and that its budgets could not count it, said now
    and kept in `usage.why` (its progress entry's usage line, a run's narrative)."""
    from specflux.agent.usage_checks import uncounted

    said = uncounted(usage, request.token_budget, request.budget_usd)
    if said:
        usage.why = said
        say(f"usage unknown: {said}")


def _as_now(soon: "Callable[[], tuple[str, dict]]", manager, git, wrote: list[Path]) -> "tuple[str, dict] | None":
    """The status `soon` read as the agent stopped (`Git.status_soon`), standing for now: with the
    files specflux wrote since (`wrote`: task files, archives) added. None (read it again) where
    specflux removed a file or wrote any other (one git may ignore, which the status would not show)."""
    return _with_ours(soon(), manager, git, wrote)


def _with_ours(seen: "tuple[str, dict] | None", manager, git, wrote: list[Path]) -> "tuple[str, dict] | None":
    """`seen` with the files specflux wrote since (`wrote`) added, where it can stand for now:
    None (read it again) where specflux removed a file or wrote one outside `task-states/` and
    `archives/` (git may ignore it, which the status would not show)."""
    import os

    ws = manager.ws
    kept = (ws.states_dir, ws.archives_dir)
    for path in wrote:
        if not os.path.lexists(path) or (path.parent not in kept and path != ws.dir / ".gitignore"):
            return None
    return _with_written(seen, git, wrote)


def _with_written(seen: "tuple[str, dict] | None", git, written: list[Path]) -> "tuple[str, dict] | None":
    """`seen` (a `git.status()`) with the files specflux wrote since (`written`: the review's entry
    in its task file, an archive): each still as it was in `seen` where it was there (its HEAD and
    index entries have not moved), else a path to commit as it is now (`??`: added or updated
    from the work tree alike). None stays None."""
    if seen is None:
        return None
    from specflux.vcs.status import StatusEntry

    head, entries = seen
    entries = dict(entries)
    for path in written:
        rel = git.inside(path)
        if not rel:
            return None  # outside the work tree (cannot be): read the status again
        entries.setdefault(rel, StatusEntry("??"))
    return head, entries


def _commit(manager, git, baseline, task_id, side, outcome, report, extra=None,
            status: "tuple[str, dict] | None" = None) -> None:
    """One commit with what the session changed, leaving the user's own uncommitted work alone;
    `status`: the work tree's status where the caller knows it (`Git.commit_session`)."""
    first = _first_did(manager, task_id, side.handoff, report.session) or f"ended: {outcome.stop}"
    done = git.commit_session(baseline, None, commit_subject(task_id, report.session, first),
                              {**_trailers(task_id, report, outcome), **(extra or {})}, status=status)
    report.commit = done.sha
    report.changed = list(done.paths)
    report.notices += done.notes
    if done.after is not None:  # what is left uncommitted, known without asking git again
        from specflux.vcs.status import dirty_records

        report.after = (done.sha, done.after) if done.sha else None
        under = git.inside(manager.ws.root)
        report.uncommitted = None if under is None else dirty_records(done.after, under)


def _first_did(manager, task_id: str, handoff: Handoff | None, number: int | None = None) -> str | None:
    """The first thing the session did: its hand-off's, or its own entry's (`number`)."""
    if handoff is not None:
        return handoff.did[0]
    sessions = manager.load(task_id).sessions()
    mine = [s for s in sessions if s.number == number] or sessions[-1:]
    return mine[-1].did[0] if mine and mine[-1].did else None


def _trailers(task_id: str, report: SessionReport, outcome: SessionOutcome) -> dict[str, str]:
    return {
        "Specflux-Task": task_id,
        "Specflux-Session": str(report.session),
        "Specflux-Status": report.status or "",
        "Specflux-Stop": outcome.stop,
        "Specflux-Duration-Ms": str(outcome.duration_ms),
        **usage_trailers(outcome.usage),
    }


def usage_trailers(u: "Usage") -> dict[str, str]:
    """What a session spent, as trailers: tokens, `Specflux-Model` and `Specflux-Cost-Usd` where
    known; a usage that could not be read is `Specflux-Usage: unknown`, never 0 tokens."""
    if not u.known:
        return {"Specflux-Usage": "unknown"}
    out = {
        "Specflux-Input-Tokens": str(u.input_tokens),
        "Specflux-Output-Tokens": str(u.output_tokens),
        "Specflux-Cache-Read-Tokens": str(u.cache_read_input_tokens),
        "Specflux-Cache-Write-Tokens": str(u.cache_creation_input_tokens),
    }
    if u.model:
        out["Specflux-Model"] = u.model
    if u.cost_usd is not None:
        out["Specflux-Cost-Usd"] = f"{u.cost_usd:.6f}"
    return out


# --------------------------------------------------------------------- the command line


def backend_from_args(manager: "TaskStateManager", args) -> tuple["Backend", bool]:
    """The backend `specflux run` asked for, and whether it edits the task file itself."""
    from specflux.agent.presets import is_command_agent, resolve

    if is_command_agent(args.agent):  # an agent CLI: a preset, [agents.NAME], or --agent command --cmd
        from specflux.agent.command_backend import CommandBackend

        preset = resolve(args.agent, args.cmd, manager.ws.config.agents)
        path = manager.path(args.id)
        env = {"SPECFLUX_TASK_FILE": str(path), "SPECFLUX_TASK_ID": args.id, "SPECFLUX_ROOT": str(manager.ws.root)}
        timeout = args.timeout or manager.ws.config.agent.session_timeout_s
        sandbox = "off" if getattr(args, "no_sandbox", False) else manager.ws.config.agent.sandbox
        return CommandBackend(args.cmd or preset.command, timeout_s=timeout, env=env, preset=preset,
                              model=args.model, sandbox=sandbox), True
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
    if args.token_budget:  # a budget the agent's output cannot feed: said before it starts
        from specflux.agent.metering import for_run

        unmetered = for_run(manager, args.agent, args.cmd, args.model, True, args.token_budget, None, False,
                            "the session's")
        if unmetered:
            print(f"specflux: warning: {unmetered}", file=sys.stderr)
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
        if not u.known:
            spent = f"tokens: unknown ({u.why or 'the agent printed no usage specflux can read'})"
        else:
            spent = (f"tokens: {u.input_tokens} input, {u.output_tokens} output, {u.cache_read_input_tokens} "
                     f"cache-read, {u.cache_creation_input_tokens} cache-write; "
                     f"cost {format_cost(u.cost_usd)}" + (f" ({u.model})" if u.model else ""))
        lines.append(f"  {o.turns} turn(s), {o.duration_ms / 1000:.1f} s, {spent}")
        if o.recording:
            lines.append(f"  recording: {o.recording}")
    if report.commit:
        lines.append(f"  commit {report.commit[:8]}: {len(report.changed)} file(s)")
    for target in report.wired:
        lines.append(f"  wired into task {target}")
    return "\n".join(lines)
