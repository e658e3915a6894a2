"""A step's hand-in, as the run takes it: a channel opened for the step's session alone
(agent/handin_channel.py), and what the reviewer's step says when its session handed in nothing,
something malformed, or something it did not make (tampering). A reviewer without a verdict has
not approved; the narrative says which of these it was, never "changes requested" in its stead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specflux.agent.handin_channel import HandinChannel, Received
    from specflux.flow.record.run import Run


NONE_HANDED_IN = "the reviewer handed in no verdict"  # the session's own error says so too (progress_entry.py)


def open_channel(step_id: str) -> "HandinChannel":
    """A fresh channel for the review hand-in of step `step_id` (a private temporary folder and key)."""
    from specflux.agent.handin_channel import HandinChannel

    return HandinChannel(step_id, "review")


def handin_summary(received: "Received | None", run: "Run", step: dict[str, Any]) -> dict[str, Any]:
    """What a session's step summary records of its hand-in: `{"handin": {problem?, refused?, tampered?}}`
    when something was wrong with it, or files were planted where hand-ins used to go (the run's
    `handins/` folder, read by nothing now: whatever is there was put there by something else)."""
    out: dict[str, Any] = {}
    if received is not None and received.problem:
        out["problem"] = received.problem
    tampering: list[str] = []
    if received is not None and received.tampered:
        out["refused"] = f"a hand-in for step {step['stepId']} was refused: {received.tampered}"
        tampering.append(out["refused"])
    aside = run.dir / "steps" / "planted"  # git-ignored, with the engine's scratch
    planted = _set_aside(run.handins_dir, aside, step["stepId"])
    if planted:
        tampering.append(f"hand-in files planted in {_shown(run, run.handins_dir)} ({', '.join(planted[:5])}"
                         f"{', ...' if len(planted) > 5 else ''}) were ignored and moved to {_shown(run, aside)}: "
                         "a verdict reaches the run only through its own step's channel")
    if tampering:
        out["tampered"] = tampering
    return {"handin": out} if out else {}


def no_verdict(done: dict[str, Any], refused: str | None) -> dict[str, Any]:
    """The reviewer step's output when its session gave no verdict the run can take: not approved,
    marked `noVerdict`, with the reason as its one blocker issue (what the next coder is told)."""
    handin = done.get("handin") or {}
    review = done.get("review") or {}
    if refused:
        why = refused
    elif handin.get("problem"):
        why = f"the reviewer's hand-in was malformed: {handin['problem']}"
    elif handin.get("refused"):
        why = f"the reviewer handed in no verdict of its own ({handin['refused']})"
    else:
        error = done.get("error") or ""
        ended = "its session ended without one" if not error or error.startswith(NONE_HANDED_IN) else error
        why = f"{NONE_HANDED_IN} ({ended})"
    return {"approved": False, "noVerdict": True, "criteriaResults": review.get("criteriaResults", []),
            "issues": [{"severity": "blocker", "description": why}]}


def tampering_notices(done: dict[str, Any]) -> list[str]:
    """The narrative's lines for hand-ins this step refused as tampering."""
    return [f"tampering: {line}" for line in (done.get("handin") or {}).get("tampered", [])]


def _set_aside(folder: Path, aside: Path, step_id: str) -> list[str]:
    """The names of the files in `folder`, moved into `aside` (named after the step that found
    them), so that each is reported once and kept for a person to look at."""
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return []
    for name in names:
        try:
            aside.mkdir(parents=True, exist_ok=True)
            (folder / name).replace(aside / f"{step_id}-{name}")
        except OSError:
            pass
    return names


def _shown(run: "Run", folder: Path) -> str:
    try:
        return str(folder.relative_to(run.ws.root))
    except ValueError:
        return str(folder)
