"""Whether a coder's attempt stands when the tests do not decide it, in words that name why not.

- An agent CLI that exited non-zero (or could not start) failed its attempt, whatever the tests or
  its task file say: `agent_failed`.
- Without a `[validate]` command the coder's own claim decides: it claims the task done when its
  session ended normally and it handed over a chain output, or ticked every acceptance criterion
  (an agent CLI that logs its session and ticks its boxes claims it, chain output or not).
  `claim` says so, or exactly what is missing.
- `retry_context`: why the last attempt failed, for the next coder session ("The tests failed"
  only where tests ran).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specflux.agent.command_backend import COULD_NOT_START, EXITED
from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager


def agent_failed(done: dict[str, Any]) -> str | None:
    """Why the agent CLI of this session failed (its exit code and last error lines), or None."""
    error = done.get("error") or ""
    if done.get("stop") == "error" and error.startswith((EXITED, COULD_NOT_START)):
        return error.splitlines()[0] + (f" ({error.splitlines()[-1].strip()})" if len(error.splitlines()) > 1 else "")
    return None


def claim(done: dict[str, Any], manager: "TaskStateManager", task_id: str) -> tuple[bool, str | None]:
    """(whether the coder claims the task done, the reason when it does not)."""
    if not done.get("ok"):
        return False, done.get("error") or f"the session ended ({done.get('stop')}) without handing over"
    if done.get("handoff") is not None:
        return True, None
    try:
        criteria = manager.load(task_id).criteria_lines
    except SpecfluxError as e:
        return False, f"the task file cannot be read: {e}"
    unticked = [str(n) for n, _, checked, _, _ in criteria if not checked]
    if criteria and not unticked:
        return True, None
    which = f"criteria {', '.join(unticked)} are not ticked" if unticked else "the task has no criteria to tick"
    return False, (f"the coder did not claim the task done: {which} and it wrote no chain output "
                   "(tick each criterion it met, or write `### Summary` under `## 4. Chain Output`)")


def retry_context(state: dict[str, Any], task_id: str) -> str:
    """Exactly why the last attempt at `task_id` failed, for the next coder session: the failed
    tests with their messages, or the reviewer's issues and unmet criteria. Empty on a first try."""
    coder = state.get("coderOutput") or {}
    review = state.get("reviewerOutput") or {}
    attempts = (state.get("taskAttempts") or {}).get(task_id, 0)  # this attempt included
    if attempts <= 1:
        return ""
    last_coder = coder.get("taskId") == task_id
    lines: list[str] = []
    if review.get("taskId") == task_id and review.get("noVerdict") and \
            (not last_coder or (coder.get("selfValidation") or {}).get("passed")):
        issues = [i.get("description") for i in review.get("issues", [])]
        lines = [f"## Why the task is worked again (attempt {attempts} of this task)",
                 "The reviewer gave no verdict (this is not a rejection of your work):",
                 *(f"- {i}" for i in issues),
                 "Check your work against each acceptance criterion; it is reviewed again after your session."]
        return "\n".join(lines)
    if review.get("taskId") == task_id and not review.get("approved") and \
            (not last_coder or (coder.get("selfValidation") or {}).get("passed")):
        lines = [f"## Why the last attempt was sent back (attempt {attempts} of this task)",
                 "The reviewer requested changes:"]
        lines += [f"- [{i.get('severity')}] {i.get('description')}" for i in review.get("issues", [])]
        unmet = [c.get("criterion") for c in review.get("criteriaResults", []) if not c.get("met")]
        if unmet:
            lines += ["Criteria the reviewer found not met:", *(f"- {c}" for c in unmet)]
    elif (approval := state.get("approvalOutput") or {}) and approval.get("taskId", task_id) == task_id \
            and not approval.get("approved"):
        lines = [f"## Why the last attempt was sent back (attempt {attempts} of this task)",
                 f"A person rejected it: {approval.get('note') or '(no note)'}"]
    elif last_coder and not (coder.get("selfValidation") or {}).get("passed"):
        lines = [f"## Why the last attempt failed (attempt {attempts} of this task)"]
        checked = coder.get("selfValidation") or {}
        issues = checked.get("issues") or []
        tested = not any(checked.get(k) for k in ("claimedByAgent", "agentFailed", "noChange")) and \
            not any(str(i).startswith("the session timed out") for i in issues)
        heading = "The tests failed:" if tested else "It was not accepted:"
        lines += [heading, *(f"- {issue}" for issue in issues)] if issues else ["The attempt did not pass."]
    if lines:
        untested = (coder.get("selfValidation") or {}).get("claimedByAgent")
        lines.append("Fix exactly these; " + ("the run checks again after your session." if untested else
                                              "the tests are run again after your session."))
    return "\n".join(lines)
