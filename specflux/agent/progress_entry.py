"""The session's entry in the task's progress log, whichever way the agent wrote it: from its
`end_session` hand-off (tools), as the reviewer's verdict, or as the entry an agent CLI wrote in
the task file itself (numbered after every other entry, what it forgot added); a session without
a hand-off gets an entry that says why.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from specflux.agent.backend import SessionOutcome
from specflux.agent.plain_inputs import WrittenChainOutput, WrittenHandoff
from specflux.agent.session_report import SessionReport
from specflux.base.errors import SpecfluxError
from specflux.format.document import TaskDocument
from specflux.format.fields import USAGE_UNKNOWN, format_usage
from specflux.format.model import SessionInput

if TYPE_CHECKING:
    from specflux.agent.handoff import Handoff


def usage_line(outcome: SessionOutcome) -> str:
    """The session entry's `**Usage:**` line: tokens, model and cost, or `unknown` when the agent
    printed nothing they could be read from, or numbers not believed (never 0 tokens, as if it had
    been free), saying why."""
    usage = outcome.usage
    if not usage.known:
        return f"{USAGE_UNKNOWN} ({usage.why or 'the agent printed no usage specflux can read'})"
    return format_usage(usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens,
                        usage.cache_creation_input_tokens, usage.model, usage.cost_usd)


def entry_for(handoff: Handoff | None, outcome: SessionOutcome, stamp: str) -> SessionInput:
    """The session's progress-log entry: its hand-off's, or one saying why there is none."""
    if handoff is not None:
        return SessionInput(did=handoff.did, issues=handoff.issues, next=handoff.next, timestamp=stamp)
    why = {
        "max_turns": "the session reached its turn limit",
        "token_budget": "the session spent its token budget",
        "budget_usd": "the session spent its budget in money",
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


def record_entry(manager, task_id, side, outcome, clock, report, sandbox, complete_on_handoff=True) -> list[Path]:
    """The session entry (and the completion, when the agent handed over a chain output) of a
    session whose agent changed the task through its tools."""
    handoff = side.handoff or outcome.handoff
    report.handoff = handoff
    line = usage_line(outcome)
    entry = entry_for(handoff, outcome, clock())
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


def handed_in_review(channel) -> dict | None:
    """The verdict an agent CLI handed in with `specflux submit-review` through its step's
    channel (a `HandinChannel`: checked again, and refused unless sealed by this step's session;
    the channel keeps why), or None."""
    if channel is None:
        return None
    return channel.receive().data


def _plain_review(review) -> dict:
    """A verdict (a pydantic model from the tool, or a dict from a hand-in) as a plain dict."""
    data = review.model_dump() if hasattr(review, "model_dump") else dict(review)
    return {
        "approved": bool(data.get("approved")),
        "issues": [dict(i) for i in data.get("issues", [])],
        "criteriaResults": [dict(c) for c in data.get("criteria_results", data.get("criteriaResults", []))],
    }


def record_review(manager, task_id, report, outcome, clock) -> list[Path]:
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
        entry = entry_for(None, outcome, clock())
        entry.did = [f"Review ended without a verdict: {entry.did[0]}"]
        if report.stop == "end_turn":
            report.stop = "error"
        report.error = report.error or "the reviewer handed in no verdict"
    done = manager.append_session(task_id, entry, commit=False, usage_line=usage_line(outcome))
    report.session, report.status = done.session, done.status
    report.notices += done.notices
    return list(done.changed)


def settle_agent_edits(manager, task_id, before, hand, outcome, clock, report, complete=True) -> list[Path]:
    """After an agent CLI edited the task file itself (a broken one was already put back by
    `restore_broken`): add what it forgot, complete it. Its entry is the one it wrote (told apart
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
        touched += _add_usage_line(manager, task_id, doc, agents[-1][1], usage_line(outcome))
        doc = manager.load(task_id)
    else:
        done = manager.append_session(task_id, entry_for(None, outcome, clock()), commit=False,
                                      usage_line=usage_line(outcome))
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
            last = next((s for s in reversed(doc.sessions()) if s.number == number), None)
            report.handoff = WrittenHandoff(did=list(last.did) if last and last.did else ["(see the task file)"],
                                            chain_output=WrittenChainOutput(out.summary, out.downstream))
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


def _add_usage_line(manager, task_id, doc: TaskDocument, region, line: str) -> list[Path]:
    """The agent's own entry (`region` of `doc`) with specflux's `**Usage:**` line at its end,
    where it has none: what the session spent is in its entry as in its commit's trailers."""
    from specflux.format.outline import newline_of
    from specflux.store.values import Outcome

    body = doc.text[region.start:region.end]
    if "**Usage:**" in body:
        return []
    newline = newline_of(doc.text)
    content = body.rstrip()
    at = region.start + len(content)
    text = f"{doc.text[:at]}{newline}{newline}**Usage:** {line}{doc.text[at:]}"
    outcome = Outcome(task_id)
    with manager.changing([task_id], outcome) as pending:
        pending.files.write(manager.path(task_id), text)
    return outcome.changed


def _set_metadata(manager, task_id, updates) -> list[Path]:
    if not updates:
        return []
    from specflux.store.values import Outcome

    outcome = Outcome(task_id)
    with manager.changing([task_id], outcome) as pending:
        pending.files.write(manager.path(task_id), manager.load(task_id).set_metadata(updates))
    return outcome.changed


def number_agents_entries(manager, task_id: str, before: Counter, baseline, report: "SessionReport") -> set[str]:
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
        pass  # a file the agent broke is put back by restore_broken
    return hand


def _hand_entries(manager, task_id: str, baseline) -> set[str]:
    """The entries (`_entry_key`) a person logged for the task while the session ran: committed
    meanwhile by `specflux session` (a commit titled with the entry's number). An agent CLI does
    not commit, so these are never its own."""
    git = manager.git
    if baseline is None or git is None or git.head() == baseline.head:  # nothing committed meanwhile
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


def _entry_key(text: str) -> str:
    """A session entry's text, compared across versions of the file (line endings, trailing space)."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().splitlines())
