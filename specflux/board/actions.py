"""What the control room's page may do, each through the library call its CLI command makes, with
the same refusals and the same commits:

- `check` a criterion (`specflux check`/`uncheck`), `set` status, title or dependencies
  (`specflux set`), `requirements` (`specflux set --req`), `new` (`specflux new`): each names the
  version of the task file the page showed (`sha`); if the file changed since (a hand edit in an
  editor), nothing is written and the answer is the file as it is now (`Conflict`);
- `start` a run, and `pause`, `resume`, `stop`, `approve`, `reject` one: a `specflux flow ...`
  process (launcher.py), the command a person would type, whose lines the page follows.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from specflux.base.errors import SpecfluxError, UsageError
from specflux.board.launcher import Launcher

if TYPE_CHECKING:
    from specflux.board.live import Board
    from specflux.store.manager import TaskStateManager

CONTROLS = ("pause", "resume", "stop", "approve", "reject")
DIFF_LIMIT = 200_000  # characters of a diff shown on the page; the rest is named


class Conflict(SpecfluxError):
    """The page's edit was made on a version of the file that is no longer on disk."""

    def __init__(self, message: str, task: dict[str, Any] | None):
        super().__init__(message)
        self.task = task


def _text(request: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = request.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, (str, int)) or isinstance(value, bool) or (isinstance(value, str) and not value.strip()):
        raise UsageError(f"{key!r} must be given (text)")
    return str(value)


def _ids(request: dict[str, Any], key: str) -> list[str]:
    value = request.get(key) or []
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise UsageError(f"{key!r} must be a list of task ids")
    return [str(v).lstrip("#") for v in value if str(v).strip()]


def _number(request: dict[str, Any], key: str, kind=int) -> Any:
    value = request.get(key)
    if value in (None, ""):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise UsageError(f"{key!r} must be a number, not {value!r}") from None
    if isinstance(number, float) and not math.isfinite(number) or number <= 0:
        raise UsageError(f"{key!r} must be a positive number, not {value!r}")
    return number


class Actions:
    def __init__(self, manager: "TaskStateManager"):
        self.manager = manager
        self.launcher = Launcher(manager.ws.root)
        self.board: "Board | None" = None

    def page_data(self) -> dict[str, Any]:
        from specflux.agent.presets import PRESETS

        return {"agents": ["command", "anthropic", *sorted(PRESETS), *sorted(self.manager.ws.config.agents)],
                "launches": self.launcher.summary()}

    # ------------------------------------------------------------ dispatch

    def perform(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            raise UsageError("an action is a JSON object with an \"action\"")
        action = request.get("action")
        handler = {"check": self.check, "set": self.set, "requirements": self.requirements, "new": self.new,
                   "start": self.start}.get(action) if isinstance(action, str) else None
        if action in CONTROLS:
            return self.control(action, request)
        if handler is None:
            raise UsageError(f"unknown action {action!r}")
        return handler(request)

    # ------------------------------------------------------------ tasks

    def _fresh(self, task_id: str, sha: Any) -> None:
        """Refuse (Conflict) when the task file is not the version the page showed."""
        from specflux.board.page import _task_entry, file_version

        try:
            current = file_version(self.manager.load(task_id).text)
        except SpecfluxError as e:
            raise Conflict(f"{e}; nothing was written", _task_entry(self.manager, task_id, None)) from None
        if not isinstance(sha, str) or sha != current:
            raise Conflict(f"task {task_id}'s file changed on disk since the page showed it (edited by hand?); "
                           "nothing was written: here it is as it is now", _task_entry(self.manager, task_id, None))

    def check(self, request: dict[str, Any]) -> dict[str, Any]:
        task = _text(request, "task")
        index = _number(request, "index")
        self._fresh(task, request.get("sha"))
        checked = request.get("checked", True) is not False
        outcome = self.manager.set_checked(task, [index], checked)
        (number, text, changed), = outcome.criteria
        verb = "checked" if checked else "unchecked"
        return {"message": f"task {outcome.task_id}: {verb if changed else 'already ' + verb} {number}. {text}"}

    def set(self, request: dict[str, Any]) -> dict[str, Any]:
        task = _text(request, "task")
        self._fresh(task, request.get("sha"))
        outcome = self.manager.update(task, status=_text(request, "status", required=False),
                                      title=_text(request, "title", required=False),
                                      add_deps=_ids(request, "add_deps"), remove_deps=_ids(request, "remove_deps"))
        return {"message": "; ".join(f"task {outcome.task_id}: {line}" for line in outcome.fields) or "nothing changed"}

    def requirements(self, request: dict[str, Any]) -> dict[str, Any]:
        from specflux.store.requirements import set_requirements

        task = _text(request, "task")
        self._fresh(task, request.get("sha"))
        text = request.get("text")
        if not isinstance(text, str):
            raise UsageError("'text' must be the requirements' text")
        outcome = set_requirements(self.manager, task, text)
        return {"message": f"task {outcome.task_id}: " + ("; ".join(outcome.fields) or "nothing changed")}

    def new(self, request: dict[str, Any]) -> dict[str, Any]:
        criteria = request.get("criteria") or []
        if isinstance(criteria, str):
            criteria = [line for line in criteria.splitlines() if line.strip()]
        if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
            raise UsageError("'criteria' must be a list of texts")
        requirements = request.get("requirements") or ""
        if not isinstance(requirements, str):
            raise UsageError("'requirements' must be text")
        deps = _ids(request, "dependencies")
        if deps:
            from specflux.store.chain import check_new_dependencies

            check_new_dependencies(self.manager, "(new)", deps, [])
        outcome = self.manager.create(_text(request, "title"), dependencies=deps, requirements=requirements,
                                      criteria=criteria)
        return {"message": f"task {outcome.task_id} created", "task": outcome.task_id}

    # ------------------------------------------------------------ runs

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        argv = ["flow", "start", *_ids(request, "tasks")]
        if request.get("all"):
            argv.append("--all")
        if len(argv) == 2:
            raise UsageError("choose the tasks to run (or all of them)")
        agent = _text(request, "agent", required=False) or "command"
        argv += ["--agent", agent]
        if agent == "command":
            argv += ["--cmd", _text(request, "cmd")]
        for key, flag, kind in (("max_iterations", "--max-iterations", int), ("token_budget", "--token-budget", int),
                                ("budget_usd", "--budget-usd", float), ("parallel", "--parallel", int)):
            value = _number(request, key, kind)
            if value is not None:
                argv += [flag, str(value)]
        if request.get("no_sandbox"):
            argv.append("--no-sandbox")
        if request.get("allow_unmetered"):
            argv.append("--allow-unmetered")
        launch = self.launcher.start(argv)
        return {"message": f"started: {launch.command}", "launch": launch.number}

    def control(self, action: str, request: dict[str, Any]) -> dict[str, Any]:
        from specflux.flow.record.run import Run
        from specflux.flow.runs import control

        run = Run.find(self.manager.ws, _text(request, "run"))
        note = request.get("note")
        if note is not None and not isinstance(note, str):
            raise UsageError("'note' must be text")
        if action == "reject" and not (note or "").strip():
            raise UsageError("reject needs a note saying what to change")
        if action in ("pause", "stop"):  # answered at once: the engine obeys between steps
            return {"message": f"run {run.id}: {control(run, action, note, self.manager)}"}
        state = run.state()
        if action in ("approve", "reject") and state.get("pausedFor") != "approval" and not any(
                s["kind"] == "approval" and s["status"] == "WAITING" for s in state["openSteps"].values()):
            raise UsageError(f"run {run.id} is not waiting for an approval")
        if action == "resume" and run.engine_running() and state["status"] != "paused":
            # (paused, with its process still ending: the resume started below waits for it)
            raise UsageError(f"run {run.id} is running (in another process)")
        argv = ["flow", action, run.id, *(["--note", note] if note else [])]
        launch = self.launcher.start(argv)  # approve, reject and resume drive the run on: a process of its own
        return {"message": f"started: {launch.command}", "launch": launch.number}

    def diff(self, run_id: str, task_id: str) -> dict[str, Any]:
        """What the run changed for the task: its lane's branch against its base, or the run's
        branch against the run's base commit."""
        from specflux.flow.record.run import Run
        from specflux.vcs.process import run_git

        if self.manager.git is None:
            raise UsageError("no git repository: there is no diff to show")
        run = Run.find(self.manager.ws, run_id)
        state = run.public_state()
        lane = (state.get("lanes") or {}).get(task_id) or {}
        base, tip = (lane.get("base"), lane.get("branch")) if lane.get("branch") else (state.get("baseCommit"), "HEAD")
        if not base:
            raise UsageError(f"run {run.id} has no base commit to compare with")
        done = run_git(("diff", "--stat", "--patch", f"{base}..{tip}", "--", ".", ":(exclude).specflux/runs"),
                       self.manager.git.root)
        if done.returncode != 0:
            raise UsageError(f"git diff {base[:10]}..{tip}: {done.stderr.strip()}")
        text = done.stdout
        more = max(0, len(text) - DIFF_LIMIT)
        return {"run": run.id, "task": task_id, "base": base, "tip": tip, "diff": text[:DIFF_LIMIT],
                "more": more}
