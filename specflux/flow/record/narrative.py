"""`narrative.md`: one line a person can read per event that matters, derived from the events."""

from __future__ import annotations

from typing import Any, Iterable


def line(event: dict[str, Any]) -> str | None:
    """The narrative line of one event, or None for bookkeeping."""
    kind = event["type"]
    at = (event.get("at") or "")[11:19]
    task = f"task {event['taskId']}" if event.get("taskId") else ""
    if kind == "run_created":
        tasks = ", ".join(t["id"] for t in event["tasks"])
        said = f"\n  - {event['unmetered']}" if event.get("unmetered") else ""  # agent/metering.py
        return f"{at} run {event['runId']} created: workflow {event['workflow']['name']}, tasks {tasks or '(none yet)'}{said}"
    if kind == "status":
        why = event.get("pausedFor") or event.get("failureReason")
        if why and event.get("failureDetail"):
            why = f"{why}: {event['failureDetail']}"
        return f"{at} run {event['status']}" + (f" ({why})" if why else "")
    if kind == "control":
        note = f": {event['note']}" if event.get("note") else ""
        return f"{at} {event['action']} requested{note}"
    if kind == "step_started":
        return f"{at} {event['kind']} started on {task or 'the run'} (step {event['stepId']})"
    if kind == "step_finished":
        notices = (event.get("output") or {}).get("notices") or []
        if (event.get("usage") or {}).get("why"):  # unknown usage, and why (agent/usage_checks.py)
            notices = [*notices, f"usage unknown: {event['usage']['why']}"]
        said = "".join(f"\n  - {n}" for n in notices)
        return f"{at} {event['kind']} finished on {task or 'the run'}: {_outcome(event)}{said}"
    if kind == "decision":
        d = event["decision"]
        why = d.get("why") or ", ".join(_action(a) for a in d.get("actions", [])) or "nothing to do"
        return f"{at} decision: {why}" + (" (finalize)" if d.get("finalize") else "")
    if kind == "lanes_kept":
        return f"{at} unfinished work kept: " + ", ".join(f"task {t} on {b}" for t, b in event["branches"].items())
    if kind == "task_reconciled":
        return f"{at} task {event['taskId']} was completed by {event.get('by')} since this run last drove it: not worked again"
    if kind == "task_status":
        reason = f" ({event['reason']})" if event.get("reason") else ""
        return f"{at} task {event['taskId']} is {event['status']}{reason}"
    return None


def _action(a: dict[str, Any]) -> str:
    if a["type"] == "REQUEST_WORK":
        task = (a.get("payload") or {}).get("taskId")
        return f"{a['workKind']}" + (f" on task {task}" if task else "")
    if a["type"] == "REQUEST_APPROVAL":
        return "ask a person for approval"
    return f"note {a['key']}"


def _outcome(event: dict[str, Any]) -> str:
    if event.get("status") == "ERROR":
        return f"error: {(event.get('error') or {}).get('message', '?')}"
    out = event.get("output") or {}
    kind = event["kind"]
    if event.get("refused"):
        return f"refused: {event['refused']}"
    if kind == "coder" and (out.get("selfValidation") or {}).get("noChange"):
        return "no change: the attempt changed nothing in the repository"
    checked = out.get("selfValidation") or {}
    if kind == "coder" and checked.get("agentFailed"):
        return f"a failed attempt: {'; '.join(checked.get('issues') or ['the agent failed'])}"
    if kind == "coder":
        v = event.get("validation") or {}
        failed = v.get("failedTests") or []
        if v:
            tests = "tests passed" if v.get("passed") else (
                f"tests failed: {', '.join(failed[:5])}" if failed else "tests failed")
        elif checked.get("passed") or not checked.get("issues"):
            tests = "no [validate] command: the coder's own claim stands"
        else:
            tests = f"no [validate] command, and {checked['issues'][0]}"
        return f"{out.get('status', '?')}, {tests}"
    if kind == "reviewer":
        issues = [i.get("description", "") for i in out.get("issues", [])]
        if out.get("approved"):
            return "approved"
        if out.get("noVerdict"):
            return f"no verdict, so not approved: {issues[0] if issues else 'nothing was handed in'}"
        return "changes requested" + (f": {'; '.join(issues[:3])}" if issues else "")
    if kind == "approval":
        note = f": {out.get('note')}" if out.get("note") else ""
        return ("approved" if out.get("approved") else "rejected") + note
    if kind == "validate":
        return "tests passed" if out.get("passed") else f"tests failed: {', '.join(out.get('failedTests', [])[:5])}"
    return "done"


def render(run_id: str, events: Iterable[dict[str, Any]]) -> str:
    lines = [f"# Run {run_id}", ""]
    lines += [f"- {text}" for e in events if (text := line(e))]
    return "\n".join(lines) + "\n"
