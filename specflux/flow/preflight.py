"""What `flow start` checks before it creates a run, so that a mistake costs nothing: no run
created, no commit, one message saying what is wrong and the command that fixes it.

- an agent that can work: `--agent replay` has nothing to replay in a new run (a run is replayed
  whole by `flow replay`), and the API needs credentials (checked without the network);
- tasks named that are complete already (all of them: refused; some: left out, and said);
- a dependency that is not complete and not in the run: refused, naming the command that runs
  both (a run takes its tasks in dependency order), never run silently before its dependency;
- task files with changes git has not committed: each session commits its task file, and would
  leave the user's change out every time; refused up front with the commands that commit it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from specflux.base.errors import Refused, UsageError

if TYPE_CHECKING:
    from specflux.flow.steps.roles import Agents
    from specflux.store.chain import Graph
    from specflux.store.manager import TaskStateManager


def check_start(manager: "TaskStateManager", graph: "Graph", chosen: list[str], *, named: bool,
                agents: "Agents", say: Callable[[str], None] = lambda line: None, committed: bool = False) -> list[str]:
    """The tasks the run should take (`chosen`, less named tasks complete already); a UsageError or
    Refused for anything that would make the run fail or do nothing. `committed`: the caller knows
    the tasks' files are as committed (`runs.start`'s `checked_out`)."""
    check_agent(agents)
    if named:
        chosen = _not_complete(graph, chosen, say)
    from specflux.flow.record.holds import Holds

    holds = Holds(manager.ws)
    held = holds.held({*chosen, *(d for t in chosen for d in graph.deps.get(t, []))})
    check_dependencies(graph, chosen, held)
    if not committed:
        free = [t for t in chosen if t not in held]  # a held one: its run's refusal says it
        try:
            check_committed(manager, free)
        except Refused:
            # a run started at the same moment may have taken some of them since `held` was read,
            # and its session be at work in their files: that is not a change of the user's
            taken = holds.held(free)
            if not taken:
                raise
            held = {**held, **taken}
            check_committed(manager, [t for t in free if t not in taken])
    for line in paused_elsewhere(manager, [t for t in chosen if t not in held]):
        say(line)
    return chosen


def check_agent(agents: "Agents") -> None:
    """`--agent replay` without a run to replay, or the API without credentials."""
    if agents.kind == "replay" and agents.replay_from is None:
        raise UsageError("`flow start --agent replay` has no recording to replay: a finished run is replayed whole "
                         "with `specflux flow replay RUN`, one session with `specflux run ID --agent replay "
                         "--recording FILE`; a new run needs an agent (ANTHROPIC_API_KEY for the API, "
                         "`--agent claude`, or `--agent command --cmd CMD`)")
    if agents.kind == "anthropic":
        from specflux.agent.anthropic_backend import check_credentials
        from specflux.base.errors import AgentError

        try:
            check_credentials()
        except AgentError as e:
            if not e.message.startswith("no Anthropic API key"):
                raise Refused(f"{e.message}; no run was started") from None
            raise Refused("no Anthropic API key, so no run was started: set ANTHROPIC_API_KEY (or "
                          "ANTHROPIC_BASE_URL to a local stand-in), or run an agent CLI: `--agent claude`, "
                          "`--agent command --cmd CMD`") from None


def _not_complete(graph: "Graph", chosen: list[str], say: Callable[[str], None]) -> list[str]:
    done = [t for t in chosen if graph.status.get(t) == "complete"]
    if not done:
        return chosen
    left = [t for t in chosen if t not in done]
    which = f"task {done[0]} is" if len(done) == 1 else f"tasks {', '.join(done)} are"
    again = " ".join(f"specflux set {t} --status pending;" for t in done[:3]).rstrip(";")
    if not left:
        raise Refused(f"{which} complete already: nothing to run (to run {'it' if len(done) == 1 else 'them'} "
                      f"again: `{again}`, then start the run)")
    say(f"{which} complete already, left out of the run (to run {'it' if len(done) == 1 else 'them'} again: `{again}`)")
    return left


def check_dependencies(graph: "Graph", chosen: list[str], held: dict[str, str] | None = None) -> None:
    """Every dependency of a chosen task is complete or in the run (which takes it first); one that
    another run is working on (`held`: task -> run) is named with that run."""
    taken, held = set(chosen), held or {}
    for task_id in chosen:
        waiting = [d for d in graph.deps.get(task_id, []) if d not in taken and graph.status.get(d) != "complete"]
        busy = [d for d in waiting if d in held]
        if busy:
            raise Refused(f"task {task_id} depends on {', '.join(f'task {d}, which run {held[d]} is working on' for d in busy)}: "
                          f"start it once that is complete (`specflux flow status {held[busy[0]]}`), or "
                          f"`specflux flow stop {held[busy[0]]}` first")
        if waiting:
            states = ", ".join(f"{d} ({graph.status.get(d, 'missing')})" for d in waiting)
            both = " ".join(dict.fromkeys([*_upstream(graph, waiting), *chosen]))
            raise Refused(f"task {task_id} depends on {'task' if len(waiting) == 1 else 'tasks'} {states}, not "
                          f"complete and not in this run: `specflux flow start {both}` runs "
                          f"{'it' if len(waiting) == 1 else 'them'} first, or complete "
                          f"{'it' if len(waiting) == 1 else 'them'} (`specflux complete ID --summary ...`)")


def _upstream(graph: "Graph", tasks: list[str]) -> list[str]:
    """`tasks` and every dependency below them not complete, in the order the run takes them."""
    wanted, stack = set(), list(tasks)
    while stack:
        t = stack.pop()
        if t in wanted or graph.status.get(t) == "complete":
            continue
        wanted.add(t)
        stack += graph.deps.get(t, [])
    return [t for t in graph.order() if t in wanted]


def paused_elsewhere(manager: "TaskStateManager", chosen: list[str], recent: int = 20) -> list[str]:
    """A note for each recent run, paused (or left running by a crash), that has chosen tasks not
    done: `flow resume` would go on with them where they were; a new run starts them afresh."""
    from specflux.flow.record.run import Run

    said = []
    for run_id in reversed(Run.ids(manager.ws)[-recent:]):
        state = Run(manager.ws, run_id).state()
        if state.get("status") not in ("paused", "running"):
            continue
        mine = [t["id"] for t in state.get("tasks") or [] if t["id"] in chosen and t["status"] != "complete"]
        if mine:
            why = state.get("failureDetail") or state.get("pausedFor") or "its process ended"
            said.append(f"task {', '.join(mine)} {'is' if len(mine) == 1 else 'are'} also in run {run_id}, "
                        f"{state['status']} ({why}): `specflux flow resume {run_id}` goes on with "
                        f"{'it' if len(mine) == 1 else 'them'} where it was; this new run starts afresh")
    return said


def check_committed(manager: "TaskStateManager", chosen: list[str]) -> None:
    """The chosen tasks' files as git has them: a change not committed would be left out of every
    session's commit (the run keeps the user's work apart from its own), so the run could not go on."""
    git = manager.git
    if git is None or not chosen:
        return
    from specflux.vcs.process import run_git

    paths = [manager.ws.relative(manager.path(t)) for t in chosen]
    done = run_git(("status", "--porcelain", "--untracked-files=all", "--", *paths), manager.ws.root)
    if done.returncode != 0:
        return
    dirty = [line[3:].strip().strip('"') for line in done.stdout.splitlines() if line.strip()]
    if dirty:
        shown = " ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        new = any(line.startswith("??") for line in done.stdout.splitlines())
        raise Refused(f"{'not committed yet' if new else 'changes not committed'}: {shown}; a run commits each "
                      "session's task file and would leave your change out of every one. Commit first: "
                      f"`git add .specflux && git commit -m 'tasks'` (or `git stash` the change)")
