"""The `specflux flow ...` commands and the agent CLIs' hand-ins (`submit-review`, `submit-tasks`):
arguments in, library calls (`specflux.flow.runs`), output. Their arguments are in `flow_parser.py`."""

from __future__ import annotations

import os
import sys

from specflux.base.errors import UsageError
from specflux.cli import command
from specflux.cli.output import emit_json
from specflux.surface.tasks import open_manager
from specflux.surface.views import cost_text, money, tokens_text


@command("flow")
def cmd_flow(args) -> int:
    name = args.flow_command
    if name is None:
        raise UsageError("flow needs a command: start, list, status, pause, resume, stop, approve, reject, log")
    return _FLOW[name](args)


def _say(line: str) -> None:
    from specflux.base.escape import safe

    _progress(f"[flow] {safe(line)}", sys.stderr)


def _progress(text: str, stream) -> None:
    """A progress line; when its stream has closed (`2>&1 | head`), the run pauses saying so."""
    try:
        print(text, file=stream, flush=True)
    except OSError:
        from specflux.agent.command_backend import CLOSED_OUTPUT
        from specflux.base.interrupts import hang_up

        hang_up(CLOSED_OUTPUT, ("stdout", "stderr"))


class Progress:
    """What a run in the foreground prints: on a terminal, each line with where the run stands
    (elapsed, current task, role and attempt, tokens and cost so far); into a pipe, plain lines."""

    def __init__(self, run, stream=None):
        import time

        self.run, self.stream, self.started = run, stream or sys.stderr, time.monotonic()
        from specflux.base.terminal import colour

        self.live = colour(self.stream)

    def __call__(self, line: str) -> None:
        from specflux.base.escape import safe

        if not self.live:
            _progress(f"[flow] {safe(line)}", self.stream)
            return
        import time

        state = self.run.state()
        elapsed = int(time.monotonic() - self.started)
        running = [s for s in state.get("openSteps", {}).values() if s["status"] == "RUNNING" and s.get("taskId")]
        where = ", ".join(f"task {s['taskId']} {s['kind']} #{state['taskAttempts'].get(s['taskId'], 0)}"
                          for s in running) or state.get("status", "")
        tokens = sum(state["metrics"][k] for k in ("inputTokens", "outputTokens"))
        cost = state["metrics"].get("costUsd")
        head = f"{elapsed // 60:02d}:{elapsed % 60:02d} {where} {tokens / 1000:.1f}k tok" + (f" {money(cost)}" if cost else "")
        _progress(f"\x1b[2m[{head}]\x1b[0m {safe(line)}", self.stream)


def _why(state) -> str | None:
    """Why a run is paused or failed, with the numbers where a limit ended it."""
    why = state.get("pausedFor") or state.get("failureReason")
    return f"{why}: {state['failureDetail']}" if why and state.get("failureDetail") else why


def _finish(run, state) -> int:
    """The run's summary on stdout, its last line what to do next when it did not complete; the
    exit code: 0 completed or waiting (paused, for approval), 1 failed or stopped, 130 interrupted."""
    from specflux.base import interrupts
    from specflux.flow.ending import next_step

    status = state["status"]
    why = _why(state)
    m = state["metrics"]
    lines = [f"run {run.id}: {status}" + (f" ({why})" if why else ""),
             f"  tasks: {m['tasksCompleted']} complete, {m['tasksFailed']} failed of {len(state['tasks'])}; "
             f"{state['iteration']} step(s), {m['totalAttempts']} coder attempt(s), {m['totalReviews']} review(s); "
             f"{tokens_text(m)}; cost {cost_text(m)}"
             + (f" of a budget of {money(state['budgetUsd'])}" if state.get("budgetUsd") else "")]
    interrupted = interrupts.pressed and status == "paused"  # Ctrl-C (or SIGHUP, a closed pipe) paused it
    if interrupted and not interrupts.why:
        lines.append(f"  interrupted: `specflux flow resume {run.id}` goes on from here")
    elif next_step(run, state):
        lines.append(f"  {next_step(run, state)}")
    said = _last_word(run, state)  # an overshoot, or who took the run's tasks: the last word
    if said:
        lines.append(f"  {said}")
    for line in lines:
        _print(line, pause=False)
    if interrupts.why and status == "paused":  # stdout may be what closed: said where it can be seen
        _tell(f"run {run.id} paused: {interrupts.why}; `specflux flow resume {run.id}` goes on from here")
    if interrupted:
        return 130  # the shell's code for Ctrl-C
    return 1 if status in ("failed", "user_exit") else 0


def _last_word(run, state) -> str | None:
    """What the run's last line says beyond the numbers: by how much it went past its budget (a
    run it failed, or one whose last session, in flight when it was reached, still finished the
    work), or, paused because another run took its tasks, who took which and what to do (docs/runs.md)."""
    over_budget = state["status"] == "failed" and state.get("failureReason") in ("budget_usd", "token_budget")
    if over_budget or (state["status"] == "completed" and (state.get("budgetUsd") or state.get("tokenBudget"))):
        from specflux.flow.workflow.limits import overshoot

        return overshoot(run.events.read, state)  # (the events are read only when the run went past)
    paused = state.get("pausedFor") or ""
    if state["status"] == "paused" and paused.startswith("holds:"):
        return paused
    return None


def _agents(args):
    from specflux.flow.steps.roles import Agents

    if args.agent not in ("anthropic", "replay"):  # an agent CLI: said now if it is no agent at all
        from specflux.agent.presets import installed, resolve
        from specflux.store.workspace import Workspace

        installed(resolve(args.agent, args.cmd, Workspace.find(explicit=args.root).config.agents))
    return Agents(kind=args.agent, cmd=args.cmd, model=args.model, sandbox="off" if args.no_sandbox else None,
                  allow_unmetered=getattr(args, "allow_unmetered", False))


def flow_start(args) -> int:
    if args.wait is not None and not args.remote:
        raise UsageError("--wait is for a worker of a shared queue: `flow start --all --remote NAME --wait [S]`")
    if args.remote:  # one worker of a queue shared through a git remote: the engine loads while it fetches
        from specflux.cli.claims_commands import work

        return work(args, lambda: _agents(args), _say)
    from specflux.flow import runs

    manager = open_manager(args.root)
    agents = _agents(args)
    ids = list(args.ids)
    if args.prd:
        ids += _plan_first(manager, args)
    run = runs.start(manager, ids, everything=args.all, workflow=args.workflow, agents=agents,
                     max_iterations=args.max_iterations, token_budget=args.token_budget, budget_usd=args.budget_usd,
                     parallel=args.parallel, say=_say)
    _print(run.id)
    return _drive(manager, run, agents=agents)


def _print(line: str, pause: bool = True) -> None:
    """A line on stdout; when the program reading it has gone (`| head`), the run pauses saying so
    (`pause`: while it runs), and stdout goes to /dev/null."""
    try:
        print(line, flush=True)
    except OSError:
        from specflux.agent.command_backend import CLOSED_OUTPUT
        from specflux.base import interrupts

        interrupts.hang_up(CLOSED_OUTPUT) if pause else interrupts.silence("stdout")


def _drive(manager, run, **options) -> int:
    """Drive `run` in the foreground and say how it ended; whatever cuts the drive short (Ctrl-C
    between steps, a closed terminal or pipe, a full disk, an error) leaves it paused, saying why
    and what to do next, never `running` with no process."""
    from specflux.base import interrupts
    from specflux.base.errors import Refused, SpecfluxError
    from specflux.flow import runs
    from specflux.flow.ending import cut_short
    from specflux.flow.record.events import RunError

    try:
        state = runs.drive(manager, run, say=Progress(run), **options)
    except KeyboardInterrupt:
        _tell(cut_short(manager, run, interrupts.why or "interrupted (Ctrl-C)")
              or f"interrupted: `specflux flow resume {run.id}` goes on from here")
        return 130
    except (RunError, UsageError, Refused):
        raise  # refused before it drove anything (another process drives it, ...): the error says it all
    except (SpecfluxError, OSError) as e:
        why = str(e) if isinstance(e, SpecfluxError) else _os_text(e)
        line = cut_short(manager, run, why)
        if line is None:  # not left running: paused (a full disk) first, or not driven at all
            if run.state()["status"] != "paused":
                raise
            line = f"{why}: run {run.id} is paused; `specflux flow resume {run.id}` goes on from here once that is fixed"
        _tell(line)
        return 1
    return _finish(run, state)


def _os_text(e: OSError) -> str:
    from specflux.base.files import os_advice

    return f"{e.filename}: {os_advice(e)}" if e.filename else os_advice(e)


def _tell(line: str) -> None:
    from specflux.base.escape import safe

    try:
        print(f"specflux: {safe(line)}", file=sys.stderr, flush=True)
    except OSError:
        pass  # the terminal is gone: `flow status` says it


def _plan_first(manager, args) -> list[str]:
    """`flow start --prd`: the planner's tasks, created, to run next."""
    from pathlib import Path

    from specflux.flow.plan import run_planner

    agent = args.agent if args.agent not in ("anthropic", "replay") else "anthropic"
    result = run_planner(manager, Path(args.prd), agent=agent, cmd=args.cmd, model=args.model,
                         no_sandbox=args.no_sandbox)
    s = result.summary
    _say(f"planned {s['totalTasks']} task(s) from {result.prd} ({s['estimatedComplexity']}): "
         f"{', '.join(result.created)}")
    if manager.git is not None and result.created:  # committed, as the run needs its task files to be
        manager.git.commit([manager.path(t) for t in result.created], f"plan: {len(result.created)} task(s) from "
                           f"{result.prd}", {"Specflux-Role": "planner"})
    return result.created


def _run(args):
    from specflux.flow.record.run import Run

    manager = open_manager(args.root)
    return manager, Run.find(manager.ws, getattr(args, "run", None))


def flow_resume(args) -> int:
    from specflux.flow import runs

    manager, run = _run(args)
    print(runs.control(run, "resume"), file=sys.stderr)
    return _drive(manager, run, allow_changed_workflow=args.allow_changed_workflow)


def _control(action):
    def handler(args) -> int:
        from specflux.flow import runs

        manager, run = _run(args)
        print(f"run {run.id}: {runs.control(run, action, getattr(args, 'note', None), manager)}")
        if action in ("approve", "reject") and not run.engine_running():
            return _drive(manager, run)
        return 0

    return handler


def flow_status(args) -> int:
    if args.remote:
        from specflux.cli.claims_commands import queue_status

        return queue_status(args)
    _, run = _run(args)
    state = run.public_state()
    if args.json:
        emit_json(state)
        return 0
    from specflux.base.escape import safe
    from specflux.base.terminal import colour, status as coloured

    painted = colour()

    def word(status: str, width: int = 0) -> str:
        """A status padded to `width`, in its colour on a terminal (text escaped before colouring)."""
        text = safe(status)
        return (coloured(text) if painted else text) + " " * max(0, width - len(text))

    lanes = state.get("parallel") or 1
    task = state["tasks"][state["currentTaskIndex"]] if state["tasks"] and lanes == 1 else None
    why = _why(state)
    lines = [f"run {safe(run.id)}: {word(state['status'])}" + (f" ({safe(why)})" if why else ""),
             safe(f"  workflow {state['workflow']} (version {state.get('workflowVersion')}), step {state['iteration']}"
                  + (f" of at most {state['maxIterations']}" if state.get("maxIterations") else ""))]
    if task:
        lines.append(safe(f"  current task: {task['id']} {task['title']} (attempt {state['currentAttempts']})"))
    m = state["metrics"]
    lines.append(safe(f"  spent: {tokens_text(m, cache=True)}; cost {cost_text(m)}" + (f" of a budget of {money(state['budgetUsd'])}" if state.get("budgetUsd")
                                                else "")))
    if lanes > 1:
        open_steps = [s for s in state["openSteps"].values() if s["status"] in ("WAITING", "RUNNING") and s.get("taskId")]
        doing = ", ".join(f"{s['taskId']} ({s['kind']}{'' if s['status'] == 'RUNNING' else ', next'})" for s in open_steps)
        lines.append(safe(f"  {lanes} lanes into branch {state.get('targetBranch')}: " + (doing or "none open")))
    for t in state["tasks"]:
        m = state["taskMetrics"].get(t["id"], {})
        lines.append(f"  {safe(t['id']):<8} {word(t['status'], 11)} attempts {m.get('attempts', 0)}, reviews {m.get('reviews', 0)}, "
                     f"{tokens_text(m)}, cost {cost_text(m)}, "
                     f"{m.get('durationMs', 0) / 1000:.1f} s"
                     f"  {safe(t['title'])}")
    for task_id, branch in (state.get("stoppedBranches") or {}).items():
        lines.append(safe(f"  task {task_id}'s unfinished work is kept on {branch}"))
    from specflux.cli.claims_commands import worker_lines

    lines += worker_lines(run.ws.dir)  # a worker of a shared queue in this clone: what it is doing
    print("\n".join(lines))
    return 0


def flow_list(args) -> int:
    from specflux.flow.record.run import Run

    manager = open_manager(args.root)
    rows = []
    for run_id in Run.ids(manager.ws):
        state = Run(manager.ws, run_id).state()
        done = sum(1 for t in state["tasks"] if t["status"] == "complete")
        rows.append({"runId": run_id, "status": state["status"], "tasksDone": done, "tasksTotal": len(state["tasks"]),
                     "iterations": state["iteration"], "started": state.get("createdAt"), "workflow": state["workflow"]})
    if args.json:
        emit_json(rows)
        return 0
    if not rows:
        print("no workflow runs yet (start one with `specflux flow start`)")
        return 0
    from specflux.surface.views import table

    print(table(["RUN", "STATUS", "TASKS", "STEPS", "STARTED"],
                [[r["runId"], r["status"], f"{r['tasksDone']}/{r['tasksTotal']}", str(r["iterations"]),
                  (r["started"] or "")[:19].replace("T", " ")] for r in rows], status_column=1))
    return 0


def flow_log(args) -> int:
    from specflux.base.escape import safe
    from specflux.flow.record import narrative

    _, run = _run(args)
    events = run.events.read()
    if args.json:
        emit_json([{"seq": e["seq"], "at": e.get("at"), "type": e["type"], "text": text}
                    for e in events if (text := narrative.line(e))])
        return 0
    print(safe(narrative.render(run.id, events).rstrip()))
    return 0


def flow_replay(args) -> int:
    from pathlib import Path

    from specflux.flow.replay import replay

    manager, run = _run(args)
    result = replay(manager, run, Path(args.into) if args.into else None, say=Progress(run))
    if result.same:
        print(f"replay of {run.id} matches: {result.steps} step(s), the same decisions, task states and files "
              f"({result.into})")
        return 0
    from specflux.base.escape import safe

    print(safe(f"replay of {run.id} differs ({result.into}): {result.difference}"), file=sys.stderr)
    return 1


_FLOW = {
    "start": flow_start, "resume": flow_resume, "replay": flow_replay, "status": flow_status, "list": flow_list, "log": flow_log,
    "pause": _control("pause"), "stop": _control("stop"), "approve": _control("approve"), "reject": _control("reject"),
}


@command("submit-review")
def cmd_submit_review(args) -> int:
    return _submit("review", args)


@command("submit-tasks")
def cmd_submit_tasks(args) -> int:
    return _submit("tasks", args)


def _submit(kind: str, args) -> int:
    from specflux.agent.handin_cli import submit_from_cli

    code, message = submit_from_cli(kind, args.json, os.environ)
    print(message, file=sys.stdout if code == 0 else sys.stderr)
    return code
