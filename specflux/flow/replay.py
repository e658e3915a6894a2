"""Whole-run replay (seed 004): the run again, offline, in a fresh clone at its base commit.

Agent responses come from the run's recordings (the replay backend also checks that every request
is the one recorded, naming the turn where it is not); `now`, the random seed and each session's
time come from the run's events; tests and tools run for real. The replay then must make the same
decisions, leave the same task states and end in the same tree, or it says where it first differs.

A run that was killed in the middle of a session and resumed does not replay: the crashed
attempt's progress-log entry is not in any recording (the replay stops at the first step it
changes, and says so).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.errors import Refused, UsageError
from specflux.base.durability import not_durable
from specflux.flow.record.events import RunError
from specflux.flow.steps.roles import Agents
from specflux.flow.record.run import Run

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

VOLATILE = {"code", "durationMs", "outputTail", "commit", "stamp", "mac",
            "target"}  # differ run to run by nature (a replay merges lanes into a branch of its own)


@dataclass
class ReplayResult:
    run_id: str
    into: Path
    steps: int
    difference: str | None  # None: the replay matches the run

    @property
    def same(self) -> bool:
        return self.difference is None


def replay(manager: "TaskStateManager", run: Run, into: Path | None = None,
           say: Callable[[str], None] = lambda line: None) -> ReplayResult:
    """Replay `run` into `into` (default: a new temporary folder)."""
    import tempfile

    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace
    from specflux.flow import runs

    events = run.events.read()
    created = events[0]
    base = created.get("baseCommit")
    git = manager.git
    if git is None or not base:
        raise RunError(f"run {run.id} did not start in a git repository with a commit: there is nothing to clone")
    agent = (created.get("agent") or {}).get("kind", "anthropic")
    if agent == "command":
        raise Refused(f"run {run.id} used an agent CLI (--agent command), whose sessions are not recorded; "
                         "only runs of the anthropic backend can be replayed")
    # absolute: the replay's run works in the clone from wherever its parts run git or compare paths
    target = Path(into).resolve() if into else Path(tempfile.mkdtemp(prefix=f"specflux-replay-{run.id}-"))
    if target.exists() and any(target.iterdir()):
        raise UsageError(f"{target} is not empty: replay into a new folder")
    _clone(git.root, target, base, run.id)
    ws_root = target / manager.ws.root.relative_to(git.root)
    clone_ws = Workspace(ws_root)
    again = {k: v for k, v in created.items() if k not in ("seq", "at", "type", "runId")}
    if again.get("targetBranch"):  # a parallel run's lanes merge into the replay's own branch
        again["targetBranch"] = f"specflux-replay/{run.id}"
    if again.get("branch"):  # the replay commits on the clone's branch, which the agents may not move
        from specflux.flow.steps.branch_guard import where

        here = where(target)
        again["branch"] = here.branch if here else None
    moments, stamps = _recorded_moments(events)
    # lanes' results are taken in the order the recorded run got them (their agents, replayed, may
    # finish in any order): every later event then comes in the recorded order too
    order = [e["stepId"] for e in events if e["type"] == "step_finished" and e["kind"] not in ("merge", "approval")]
    say(f"replaying run {run.id} in {target} (base commit {base[:12]})")
    # the clone is throw-away (a replay cut short is replayed again): its writes skip their fsyncs,
    # ~20 per step; what is written, committed and compared is the same
    with not_durable():
        clone = Run.create(clone_ws, again, run_id=run.id)
        replica = TaskStateManager(clone_ws)
        runs.drive(replica, clone, Agents(kind="replay", replay_from=run.dir), say=say, moments=moments,
                   stamps=stamps, allow_changed_workflow=False, order=order)
    difference = first_difference(events, clone.events.read()) or _tree_difference(target, run.id)
    steps = sum(1 for e in events if e["type"] == "step_finished")
    return ReplayResult(run.id, target, steps, difference)


def _clone(source: Path, target: Path, base: str, run_id: str) -> None:
    def git(*args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
        if done.returncode:
            raise RunError(f"git {' '.join(args[:2])} failed: {done.stderr.strip()}")
        return done.stdout

    # the source's settings a clone needs (git config is not cloned), read with one process: the
    # identity its commits need, and the merge driver of lanes' merges
    wanted = subprocess.run(["git", "config", "--get-regexp", r"^(user\.(name|email)|merge\.specflux\.(name|driver))$"],
                            cwd=source, capture_output=True, text=True).stdout
    settings = dict(line.partition(" ")[::2] for line in wanted.splitlines() if line.strip())  # (the last one wins, as for --get)
    # a throw-away clone needs no housekeeping: without these, each of the replay's commits starts
    # a `git maintenance run --auto` process (a sixth of a 100-step replay's git processes)
    settings.update({"commit.gpgsign": "false", "maintenance.auto": "false", "gc.auto": "0"})
    git("clone", "-q", "--no-checkout", *(f"--config={key}={value}" for key, value in settings.items() if value),
        str(source), str(target))
    git("checkout", "-q", "-B", f"specflux-replay/{run_id}", base, cwd=target)


def _recorded_moments(events: list[dict[str, Any]]) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    moments: dict[str, tuple[int, int]] = {}
    stamps: dict[str, str] = {}
    tries: dict[str, int] = {}
    for e in events:
        if e["type"] == "boot":
            moments["boot#1"] = (e["now"], e["seed"])
        elif e["type"] == "step_finished" and "now" in e:
            tries[e["stepId"]] = tries.get(e["stepId"], 0) + 1
            key = f"{e['stepId']}#{tries[e['stepId']]}"
            moments[key] = (e["now"], e["seed"])
            if e.get("stamp"):
                stamps[key] = e["stamp"]
    return moments, stamps


def _comparable(e: dict[str, Any]) -> tuple | None:
    """What of an event must be the same in a replay (None: nothing; it is bookkeeping)."""
    kind = e["type"]
    if kind == "step_requested":
        return (kind, e["stepId"], e["kind"], e.get("taskId"))
    if kind == "step_finished":
        return (kind, e["stepId"], e["kind"], e.get("status"), _strip(e.get("output")), _strip(e.get("validation")),
                _strip(e.get("chainOutput")), (e.get("error") or {}).get("type"))
    if kind == "decision":
        return (kind, e["stepId"], json.dumps(e["decision"], sort_keys=True))
    if kind == "task_status":
        return (kind, e["taskId"], e["status"])
    if kind == "task_changed":
        return (kind, e["index"])
    return None


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def first_difference(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> str | None:
    """The first event that differs, as a sentence naming its step, or None."""
    a = [(e, c) for e in recorded if (c := _comparable(e)) is not None]
    b = [(e, c) for e in replayed if (c := _comparable(e)) is not None]
    for (ea, ca), (eb, cb) in zip(a, b):
        if ca != cb:
            step = ea.get("stepId") or eb.get("stepId") or "?"
            return (f"step {step} ({ea['type']}) differs:\n  recorded: {_show(ca)}\n  replayed: {_show(cb)}"
                    + _why(eb))
    if len(a) != len(b):
        longer, which = (a, "recorded run") if len(a) > len(b) else (b, "replay")
        extra = longer[min(len(a), len(b))][0]
        return f"the {which} goes on where the other stopped: next {extra['type']} of step {extra.get('stepId', '?')}"
    final = [e for e in recorded if e["type"] == "status"][-1:]
    again = [e for e in replayed if e["type"] == "status"][-1:]
    if final and again and (final[0]["status"], final[0].get("failureReason")) != \
            (again[0]["status"], again[0].get("failureReason")):
        return f"the run ended {final[0]['status']}, the replay {again[0]['status']}"
    return None


def _show(comparable: tuple) -> str:
    text = json.dumps(comparable, default=str)
    return text if len(text) <= 400 else text[:400] + "…"


def _why(event: dict[str, Any]) -> str:
    error = (event.get("error") or {}).get("message")
    return f"\n  because: {error}" if error else ""


def _tree_difference(clone: Path, run_id: str) -> str | None:
    """Whether the replay's final tree (but the run's own files) is the recorded run's."""
    def tree(rev: str) -> dict[str, str] | None:
        done = subprocess.run(["git", "ls-tree", "-r", rev], cwd=clone, capture_output=True, text=True)
        if done.returncode:
            return None
        out = {}
        for line in done.stdout.splitlines():
            meta, _, path = line.partition("\t")
            if not path.startswith(".specflux/runs/") and "/.specflux/runs/" not in path:
                out[path] = meta.split()[2]
        return out

    def last_commit(ref: str) -> str | None:
        done = subprocess.run(["git", "log", ref, "-1", "--format=%H", f"--grep=Specflux-Run: {run_id}"],
                              cwd=clone, capture_output=True, text=True)
        return done.stdout.strip() or None

    recorded_head = last_commit("origin/HEAD") or _any_ref_commit(clone, run_id)
    replayed_head = last_commit("HEAD")
    if not recorded_head or not replayed_head:
        return None
    a, b = tree(recorded_head), tree(replayed_head)
    if a is None or b is None or a == b:
        return None
    changed = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
    return f"the replay ends with different files: {', '.join(changed[:10])}"


def _any_ref_commit(clone: Path, run_id: str) -> str | None:
    done = subprocess.run(["git", "log", "--remotes", "-1", "--format=%H", f"--grep=Specflux-Run: {run_id}"],
                          cwd=clone, capture_output=True, text=True)
    return done.stdout.strip() or None


def remove(result: ReplayResult) -> None:
    shutil.rmtree(result.into, ignore_errors=True)
