"""What the `flow` commands do, as library calls: start a run, drive it, control it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from specflux.base.errors import NotFoundError, Refused, UsageError
from specflux.flow.record.events import RunError
from specflux.flow.record.holds import Holds, describe
from specflux.flow.record.holds_check import recheck
from specflux.flow.steps.roles import Agents
from specflux.flow.record.run import Run
from specflux.flow.state import FINISHED

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

CONTROLS = ("pause", "resume", "stop", "approve", "reject")


def start(manager: "TaskStateManager", task_ids: Iterable[str] = (), *, everything: bool = False,
          workflow: str = "queue", agents: Agents | None = None, max_iterations: int | None = None,
          token_budget: int | None = None, budget_usd: float | None = None, parallel: int | None = None,
          say: Callable[[str], None] = lambda line: None, run_id: str | None = None,
          checked_out: bool = False) -> Run:
    """Create a run over `task_ids` (or every task not complete), in dependency order. The
    workflow is loaded and checked first: a broken one stops here, before anything is written.
    `parallel`: lanes (tasks worked on at once, each in its own worktree); default `[flow] parallel`.
    `run_id`: the new run's id (a worker of a shared queue names it in its claim first).
    `checked_out`: the caller has just checked the tasks' files out of a commit into a clean tree
    (a worker, at the remote's tip): they are committed, and no `git status` is asked to say so."""
    from specflux.store.chain import Graph
    from specflux.flow.workflow.limits import default_run_cap, task_step_limit
    from specflux.flow.workflow.workflow_file import load_workflow

    flow = load_workflow(workflow, manager.ws.dir)
    if manager.ws.config.validate is not None and flow.untested_warning():
        say(f"warning: {flow.untested_warning()}")
    graph = Graph.load(manager)
    for error in graph.broken:
        raise error
    wanted = list(dict.fromkeys(task_ids))
    for task_id in wanted:
        if task_id not in graph.deps:
            raise NotFoundError(f"no task {task_id} (see `specflux list`)")
    order = graph.order()
    if wanted and not everything:
        chosen = [t for t in order if t in wanted]
    else:
        chosen = [t for t in order if graph.status[t] != "complete"]
    if not chosen and flow.start != "planner":
        raise Refused("no task to run: every task is complete (name tasks, or create some with `specflux new`)")
    if max_iterations is not None and max_iterations < 1:
        raise UsageError("--max-iterations must be at least 1")
    if token_budget is not None and token_budget < 1:
        raise UsageError("--token-budget must be at least 1")
    if budget_usd is not None and not budget_usd > 0:
        raise UsageError("--budget-usd must be more than 0 (US dollars)")
    from specflux.flow.preflight import check_start  # what would make the run fail or do nothing: said now

    chosen = check_start(manager, graph, chosen, named=bool(wanted and not everything), agents=agents or Agents(),
                         say=say, committed=checked_out)
    agents = agents or Agents()
    git = manager.git
    if git is not None:
        git.check_can_commit()
    parallel = manager.ws.config.flow.parallel if parallel is None else parallel
    if parallel < 1:
        raise UsageError("--parallel must be at least 1")
    target = _check_parallel(manager, flow, chosen) if parallel > 1 else None
    cfg = manager.ws.config.flow
    from specflux.agent.metering import for_run  # budgets the agent's output cannot feed: refused or said

    from specflux.store.config import FlowConfig

    chosen_tokens = token_budget or (cfg.token_budget if cfg.token_budget != FlowConfig.token_budget else None)
    unmetered = for_run(manager, agents.kind, agents.cmd, agents.model, agents.allow_unmetered,  # the default token
                        chosen_tokens, budget_usd or cfg.budget_usd or None, bool(budget_usd))  # budget: not announced
    if unmetered:
        say(f"warning: {unmetered}")
    per_task = task_step_limit(flow, parallel)
    created = {
        "workflow": {"name": flow.name, "version": flow.version, "hash": flow.hash, "source": workflow},
        "tasks": [_task_entry(manager, t, graph) for t in chosen],
        "maxIterations": max_iterations or cfg.max_iterations or default_run_cap(len(chosen), per_task),
        "tokenBudget": token_budget or cfg.token_budget or None,
        "budgetUsd": budget_usd or cfg.budget_usd or None,
        "taskStepLimit": per_task,
        "stallRounds": cfg.stall_rounds or None,
        "baseCommit": _head(git),
        "branch": _branch(git),
        "agent": {"kind": agents.kind, "cmd": agents.cmd, "model": agents.model, "sandbox": agents.sandbox},
        **({"parallel": parallel, "targetBranch": target} if parallel > 1 else {}),
        **({"unmetered": unmetered} if unmetered else {}),
        "acceptInCommit": True,  # a task its reviewer approves is completed in that commit (early_acceptance.py)
    }
    holds = Holds(manager.ws)
    with holds.locked():  # two `flow start`s at once: the second sees the first's holds
        held = holds.held(chosen)
        if held and (wanted and not everything):
            raise Refused(f"held by another run: {describe(held)}; wait for it, or `specflux flow stop` it")
        if held:  # --all: only the free tasks, and not those waiting on a held one
            chosen = _free(chosen, held, graph)
            if not chosen:
                raise Refused(f"no task to run: every task left is held by another run ({describe(held)}) "
                                 "or waits on one")
            created["tasks"] = [t for t in created["tasks"] if t["id"] in chosen]
            created["maxIterations"] = max_iterations or cfg.max_iterations or default_run_cap(len(chosen), per_task)
        run = Run.create(manager.ws, created, run_id)
        holds.claim(run.id, chosen)
    return run


def _free(chosen: list[str], held: dict[str, str], graph) -> list[str]:
    """The tasks of `chosen` that are not held and do not wait (through any chain) on a held one."""
    blocked = set(held)
    free = []
    for task_id in chosen:  # in dependency order: a task's dependencies come first
        if task_id in blocked or any(d in blocked for d in graph.deps.get(task_id, [])):
            blocked.add(task_id)
        else:
            free.append(task_id)
    return free


def _check_parallel(manager: "TaskStateManager", flow, chosen: list[str]) -> str:
    """The branch a parallel run merges its lanes into; a UsageError when lanes cannot work here."""
    from specflux.flow.lanes.worktrees import current_branch, uncommitted

    git = manager.git
    if git is None:
        raise UsageError("--parallel works in a git repository: each lane is a git worktree")
    if flow.spec:
        raise UsageError(f"--parallel works with edge workflows; {flow.name!r} hands its decisions to "
                         f"{flow.spec}, which requests its own steps")
    if flow.start == "planner":
        raise UsageError("--parallel runs tasks that exist: plan first (`specflux plan PRD`), then start the run")
    branch = current_branch(git.root)
    paths = [str(manager.path(t).relative_to(git.root)) for t in chosen]
    dirty = uncommitted(git.root, paths)
    if dirty:
        raise Refused("each lane starts from the last commit, which does not have these task files as they "
                         f"are now: commit them first ({', '.join(dirty[:5])}{' ...' if len(dirty) > 5 else ''})")
    return branch


def _task_entry(manager: "TaskStateManager", task_id: str, graph) -> dict[str, Any]:
    doc = manager.load(task_id)
    meta = doc.metadata
    return {
        "id": task_id,
        "title": doc.title[1],
        "status": "complete" if doc.status == "complete" else "pending",
        "statusBefore": doc.status,  # what the file said: a run that ends leaves no task in_progress
        # what a failed task's agents may not leave claimed: boxes they ticked, a chain output they wrote
        "checkedBefore": [i for i, (_, _, checked, _, _) in enumerate(doc.criteria_lines, 1) if checked],
        "chainOutputBefore": None if doc.chain_output_is_placeholder else "written",
        "priority": meta.get("priority", 3),
        "complexity": meta.get("complexity", "medium"),
        "acceptanceCriteria": [item[3] for item in doc.criteria_lines],
        "dependencies": [d for d in graph.deps.get(task_id, [])],
    }


def _branch(git) -> str | None:
    """The branch checked out when the run starts: the run's, which its agents may not move."""
    if git is None:
        return None
    from specflux.flow.steps.branch_guard import where

    here = where(git.root)
    return here.branch if here else None


def _head(git) -> str | None:
    if git is None:
        return None
    return git.head() or None  # (the git dir's files where plain, else a git process)


def drive(manager: "TaskStateManager", run: Run, agents: Agents | None = None, *,
          say: Callable[[str], None] = lambda line: None, allow_changed_workflow: bool = False,
          moments: dict | None = None, stamps: dict | None = None,
          stamp_clock: Callable[[], str] | None = None, order: list[str] | None = None) -> dict[str, Any]:
    """Drive `run` in this process until it completes, fails, pauses or waits for approval.
    `order`: for a replay of a parallel run, the step ids in the order their results were taken."""
    from specflux.flow.workflow.workflow_file import load_workflow

    state = run.state()
    if state["status"] in FINISHED:
        _remove_lanes(manager, run)  # (a crash between the end of the run and its clean-up)
        _commit_history(manager, run)  # (a crash between its last event and its history commit)
        Holds(manager.ws).release(run.id)  # (and before its holds were given up)
        return state
    source = _created(run)["workflow"]
    flow = load_workflow(source.get("source") or state["workflow"], manager.ws.dir)
    if flow.hash != state.get("workflowHash") and not allow_changed_workflow:
        raise RunError(f"the workflow {flow.name!r} changed since run {run.id} started (hash "
                       f"{str(state.get('workflowHash'))[:12]} -> {flow.hash[:12]}); resume with "
                       "--allow-changed-workflow to use the new one")
    agents = agents or _agents_of(run)
    from specflux.base.lock_wait import timeout

    run.wait_while_pausing(timeout())  # (a resume pressed as the status turned paused)
    if run.engine_running():
        raise RunError(f"run {run.id} is already being driven by another process "
                       "(use `specflux flow pause/stop` from here)")
    holds = Holds(manager.ws)
    with holds.locked():
        _reconcile(manager, run, say)  # what others completed while it was not driven is not worked again
        state = run.state()
        mine = [t["id"] for t in state.get("tasks") or [] if t["status"] not in ("complete", "failed", "blocked")]
        held = holds.held(mine, other_than=run.id)
        if held:
            raise RunError(f"run {run.id} cannot go on: {describe(held)} took its tasks while it was not running; "
                           f"stop one of the runs (`specflux flow stop RUN`)")
        holds.claim(run.id, mine)
    try:
        return _drive(manager, run, flow, agents, say=say, moments=moments, stamps=stamps, stamp_clock=stamp_clock,
                      order=order, recheck=lambda: recheck(holds, run))
    finally:
        holds.release(run.id)


def _reconcile(manager: "TaskStateManager", run: Run, say: Callable[[str], None]) -> None:
    """Close the run's tasks that another run or a person completed since (steps/reconcile.py);
    in a parallel run, the lanes it had opened for them are kept on branches first."""
    from specflux.flow.steps.reconcile import reconcile

    closed = reconcile(manager, run, say)
    if closed and (run.state().get("parallel") or 1) > 1 and manager.git is not None:
        from specflux.flow.lanes.stopped import keep_lanes

        for task_id, branch in keep_lanes(manager.git.root, run, only=closed).items():
            say(f"task {task_id}: this run's own attempt is kept on {branch}")


def _drive(manager: "TaskStateManager", run: Run, flow, agents: Agents, *, say, moments, stamps, stamp_clock,
           order, recheck) -> dict[str, Any]:
    from specflux.flow.workflow.edges import spec_for
    from specflux.flow.engine import Engine
    from specflux.flow.steps.roles import Roles

    state = run.state()
    options = dict(say=say, moments=moments, stamps=stamps, **({"stamp_clock": stamp_clock} if stamp_clock else {}))
    lanes = state.get("parallel") or 1
    if lanes > 1:
        import threading

        from specflux.flow.lanes.parallel import ParallelEngine
        from specflux.flow.lanes.worktrees import Worktrees

        git = manager.git
        if git is None:
            raise RunError(f"run {run.id} runs in parallel lanes, which need the git repository it started in")
        cfg = manager.ws.config.flow
        worktrees = Worktrees(git.root, run.id, setup=cfg.worktree_setup, setup_timeout_s=cfg.worktree_setup_timeout_s)
        roles = Roles(manager, run, agents, say, cancel=threading.Event())
        engine = ParallelEngine(manager, run, spec_for(flow, manager.ws.root, lanes), roles, worktrees=worktrees,
                                order=order, **options)
    else:
        engine = Engine(manager, run, spec_for(flow, manager.ws.root), Roles(manager, run, agents, say), **options)
    engine.recheck = recheck  # before each step: does the run still hold its tasks?
    return engine.drive()


def _remove_lanes(manager: "TaskStateManager", run: Run) -> None:
    """The worktrees and branches of a parallel run that has ended, if any are left."""
    git = manager.git
    if (run.state().get("parallel") or 1) > 1 and git is not None:
        from specflux.flow.lanes.worktrees import Worktrees

        Worktrees(git.root, run.id).clean()


def _commit_history(manager: "TaskStateManager", run: Run) -> None:
    """Commit the run's history (events, state, narrative) if a crash left it uncommitted."""
    git = manager.git
    if git is None:
        return
    from specflux.vcs.process import run_git as _run

    paths = [str(run.dir / name) for name in ("events.jsonl", "state.json", "narrative.md")]
    run.save()
    dirty = _run(("status", "--porcelain", "--", *paths), git.root)
    if dirty.returncode == 0 and dirty.stdout.strip():
        state = run.state()
        why = state.get("failureReason")
        run.commit(git, f"run {run.id}: {state['status']}" + (f" ({why})" if why else ""))


def _created(run: Run) -> dict[str, Any]:
    first = run.events.read()[0]
    if first["type"] != "run_created":
        raise RunError("the first event is not run_created", run.events.shown_as, 1)
    return first


def _agents_of(run: Run) -> Agents:
    agent = _created(run).get("agent") or {}
    if agent.get("kind") == "replay":  # started before `flow start` refused it: nothing to replay
        raise Refused(f"run {run.id} was started with --agent replay, which has no recording to replay; end it "
                      f"with `specflux flow stop {run.id}` and start again with an agent (see `flow start --help`)")
    return Agents(kind=agent.get("kind", "anthropic"), cmd=agent.get("cmd"), model=agent.get("model"),
                  sandbox=agent.get("sandbox"))


def control(run: Run, action: str, note: str | None = None, manager: "TaskStateManager | None" = None) -> str:
    """Record a control request from any terminal; returns what will happen. The engine reads
    it before its next action (`stop` interrupts the step in flight at once)."""
    if action not in CONTROLS:
        raise UsageError(f"unknown control {action!r} (one of: {', '.join(CONTROLS)})")
    state = run.state()
    status = state["status"]
    if status in FINISHED and action == "resume":  # nothing to run; what a crash left is tidied
        if state.get("stoppedBranches"):
            from specflux.flow.lanes.stopped import how_to_go_on

            return f"run {run.id} was stopped; {how_to_go_on(state['stoppedBranches'])}"
        return f"run {run.id} has ended ({status}); tidying up what a crash may have left"
    if status in FINISHED:
        raise Refused(f"run {run.id} has ended ({status}); nothing to {action}")
    running = run.engine_running()
    if action == "pause":
        if status == "paused":
            raise Refused(f"run {run.id} is already paused ({state.get('pausedFor')}); `specflux flow resume {run.id}` "
                          "goes on")
        run.record({"type": "control", "action": "pause", "note": note})
        return "the run pauses after its current step" if running else \
            "the run is not being driven now; it stays paused until `flow resume`"
    if action == "stop":
        run.record({"type": "control", "action": "stop", "note": note})
        if not running:  # no engine to obey it: end the run here
            seq = run.state()["controls"][-1]["seq"]
            run.record({"type": "control_handled", "control": seq})
            kept = {}
            if manager is not None:
                from specflux.flow.steps.settle import settle_tasks
                from specflux.flow.lanes.stopped import keep_lanes

                settle_tasks(manager, run)
                if (state.get("parallel") or 1) > 1 and manager.git is not None:
                    kept = keep_lanes(manager.git.root, run)
            run.record({"type": "status", "status": "user_exit"})
            run.save()
            if manager is not None:
                _remove_lanes(manager, run)
            return "run stopped" + "".join(f"; task {t}'s unfinished work is kept on {b}" for t, b in kept.items())
        return "the run stops now (the step in flight is interrupted and records so)"
    if action in ("approve", "reject"):
        if state.get("pausedFor") != "approval" and not any(s["kind"] == "approval" and s["status"] == "WAITING"
                                                             for s in state["openSteps"].values()):
            raise Refused(f"run {run.id} is not waiting for an approval (it is {status}; see `specflux flow status`)")
        if action == "reject" and not (note or "").strip():
            raise UsageError("reject needs --note saying what to change")
        run.record({"type": "control", "action": action, "note": note})
        return f"{action}d"
    # resume
    if status == "running" and running:
        raise Refused(f"run {run.id} is running (in another process); `specflux flow pause {run.id}` or "
                      f"`specflux flow stop {run.id}` from here")
    return "resuming"
