"""The planner role (seed 000's spec agent): a requirements document in, task files out.

The planner is a session with read access to the repository and one tool, `submit_tasks`; a
hand-in with repeated keys, unknown or circular dependencies or a task without criteria is
refused back to it with the reason (agent/handin.py), so it corrects itself.

Seed 002: embed what every session needs, link the rest. Every planner session needs the PRD, so
it is embedded in the planner's context up to the context cap (PRD_CAP_KB); a longer PRD is
embedded up to the cap, in whole lines, and the rest linked with its headings, saying so. A coding
session needs the PRD only sometimes: each task's Context links it, never copies it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.errors import AgentError, UsageError
from specflux.base.files import read_text
from specflux.store.workspace import ID_PATTERN

if TYPE_CHECKING:
    from specflux.agent.handin_channel import HandinChannel
    from specflux.store.manager import TaskStateManager

PLANNER_SYSTEM = """\
You are the planner of a software project. Turn the requirements document you are given into a
queue of tasks for coding agents: each task a few hours of work for one agent session or a few,
with 2-5 sentences of requirements, acceptance criteria that a test or a reviewer can check,
a priority (1 highest to 5 lowest), a complexity (simple, medium, complex) and the keys of the
tasks it depends on. Read the repository first (read_file, list_files, search) so that the tasks
fit what exists. Do not write code.

{handin}"""

HANDIN_TOOL = """Hand in the whole list once with the submit_tasks tool. If it is refused, fix what
the refusal names and call submit_tasks again."""

HANDIN_COMMAND = """Hand in the whole list by running `specflux submit-tasks --json -` with
{"tasks": [{"key", "title", "requirements", "acceptance_criteria": [...], "priority": 1-5,
"complexity": "simple"|"medium"|"complex", "dependencies": [keys]}], "summary": {"totalTasks",
"byPriority", "estimatedComplexity": "hours"|"days"|"weeks"}} on its standard input. If it is
refused, fix what it names and run it again. Do not write code and do not commit."""

HOURS = {"simple": 2, "medium": 4, "complex": 8}
PRD_CAP_KB = 75  # the PRD embedded in the planner's context: as much as a task file may hold (seed 002)


@dataclass
class PlannedDraft:
    task_id: str
    key: str
    title: str
    requirements: str
    criteria: list[str]
    priority: int
    complexity: str
    dependencies: list[str]


@dataclass
class PlanResult:
    prd: str
    drafts: list[PlannedDraft] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    stop: str = ""
    usage: dict[str, int] = field(default_factory=dict)


class _Hooks:
    """A planner session changes no task: nothing to check or end."""

    def check_criterion(self, index: int) -> str:
        raise AgentError("the planner has no task to check")

    def end_session(self, handoff) -> str:
        raise AgentError("the planner hands in with submit_tasks")


def plan(manager: "TaskStateManager", prd: Path, backend, *, dry_run: bool = False, command_agent: bool = False,
         handin: "HandinChannel | None" = None, model: str | None = None, say: Callable[[str], None] = lambda line: None
         ) -> PlanResult:
    """Run the planner on `prd`; create the task files unless `dry_run`."""
    from specflux.agent.backend import SessionRequest
    from specflux.agent.tools import Toolbox

    ws = manager.ws
    if not prd.is_file():
        raise UsageError(f"no requirements document at {prd}")
    rel = _relative(ws.root, prd)
    preflight = getattr(backend, "preflight", None)
    if preflight is not None:
        preflight()
    cfg = ws.config.agent
    system = PLANNER_SYSTEM.format(handin=HANDIN_COMMAND if command_agent else HANDIN_TOOL)
    existing = [f"- #{r.id}: {r.title} ({r.status})" for r in manager.summaries() if r.error is None]
    context = "\n".join([
        f"# Plan the tasks of `{rel}`",
        "",
        *prd_context(read_text(prd, rel), rel, PRD_CAP_KB * 1024),
        "",
        "Tasks that exist already (do not plan them again; you may depend on them by their number):",
        *(existing or ["(none)"]),
    ])
    request = SessionRequest(system=system, context=context, model=model or cfg.model, max_turns=cfg.max_turns,
                             token_budget=cfg.token_budget, max_tokens=cfg.max_tokens, task_id=None)
    toolbox = Toolbox(ws.root, _Hooks(), command_timeout_s=cfg.command_timeout_s,
                      read_only=(ws.relative(ws.dir),), role="planner")
    try:
        outcome = backend.run(request, toolbox)
    finally:
        toolbox.close()
    task_plan = toolbox.tasks
    received = handin.receive() if task_plan is None and handin is not None else None
    if received is not None and received.data is not None:
        from specflux.agent.handin import check_tasks

        task_plan = check_tasks(received.data)
    if task_plan is None:
        why = received and (received.problem or (received.tampered and f"a hand-in was refused: {received.tampered}"))
        raise AgentError(f"the planner handed in no tasks (it stopped: {outcome.stop}"
                         + (f", {outcome.error}" if outcome.error else "") + (f"; {why}" if why else "") + ")")
    result = PlanResult(rel, stop=outcome.stop, usage={"inputTokens": outcome.usage.input_tokens,
                                                       "outputTokens": outcome.usage.output_tokens})
    result.drafts = _drafts(manager, task_plan)
    result.summary = _summary(task_plan, result.drafts)
    if not dry_run:
        for draft in result.drafts:
            link = _relative(ws.states_dir, prd, posix_up=True)
            manager.create(
                draft.title, task_id=draft.task_id, dependencies=draft.dependencies,
                requirements=f"{draft.requirements}\n\nFrom the requirements: [{rel}]({link})",
                criteria=draft.criteria,
                extra={"priority": draft.priority, "complexity": draft.complexity,
                       "source": {"path": rel, "key": draft.key, "format": "plan"}},
            )
            result.created.append(draft.task_id)
    return result


def prd_context(text: str, rel: str, cap: int) -> list[str]:
    """The PRD as the planner's context has it: whole up to `cap` bytes (UTF-8); past it, the whole
    lines that fit, then where the rest is and its headings, so the planner knows what it has not
    seen and where to look."""
    lines = text.splitlines()
    if len(text.encode("utf-8")) <= cap:
        return [f"The requirements document `{rel}`, in full:", "", "<requirements>", *lines, "</requirements>"]
    kept, size = 0, 0
    while kept < len(lines) and size + len(lines[kept].encode("utf-8")) + 1 <= cap:
        size += len(lines[kept].encode("utf-8")) + 1
        kept += 1
    headings = [f"- line {n}: {line.strip()}" for n, line in enumerate(lines[kept:], kept + 1)
                if line.startswith("#")]
    below = f"its lines 1-{kept} of {len(lines)} are below; " if kept else "its first line alone is longer, so "
    return [f"The requirements document `{rel}` is longer than the context cap ({cap // 1024} KB): {below}"
            f"lines {kept + 1}-{len(lines)} are not. Read those in `{rel}` with the search tool (pattern and "
            "path) before planning the parts they cover.",
            "", "<requirements>", *lines[:kept], "</requirements>", "",
            f"Headings of the part not embedded (lines {kept + 1}-{len(lines)}):", *(headings or ["(none)"])]


def _drafts(manager: "TaskStateManager", task_plan) -> list[PlannedDraft]:
    """Task ids for the plan's keys: a key that is a valid, unused id stays; others get numbers."""
    taken = set(manager.ws.task_ids())
    ids: dict[str, str] = {}
    numbers = [int(t) for t in taken if t.isdigit()]
    next_number = max(numbers, default=0) + 1
    for task in task_plan.tasks:
        if ID_PATTERN.fullmatch(task.key) and not task.key.isdigit() and task.key not in taken:
            ids[task.key] = task.key
        else:
            while str(next_number) in taken:
                next_number += 1
            ids[task.key] = str(next_number)
            next_number += 1
        taken.add(ids[task.key])
    out = []
    for task in task_plan.tasks:
        deps = [ids.get(d, d.lstrip("#")) for d in task.dependencies]
        out.append(PlannedDraft(ids[task.key], task.key, task.title, task.requirements, list(task.acceptance_criteria),
                                task.priority, task.complexity, deps))
    return out


def _summary(task_plan, drafts: list[PlannedDraft]) -> dict[str, Any]:
    """The seed's summary: count, by priority, estimated size (the planner's, else from complexity)."""
    by_priority: dict[str, int] = {}
    for d in drafts:
        by_priority[str(d.priority)] = by_priority.get(str(d.priority), 0) + 1
    hours = sum(HOURS[d.complexity] for d in drafts)
    estimate = "hours" if hours <= 8 else "days" if hours <= 80 else "weeks"
    if task_plan.summary is not None:
        estimate = task_plan.summary.estimatedComplexity
    return {"totalTasks": len(drafts), "byPriority": dict(sorted(by_priority.items())), "estimatedComplexity": estimate}


def _relative(base: Path, path: Path, posix_up: bool = False) -> str:
    """`path` relative to `base` (with `..` when `posix_up`), or absolute when it cannot be."""
    if posix_up:
        return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def run_planner(manager: "TaskStateManager", prd: Path, *, agent: str = "anthropic", cmd: str | None = None,
                recording: str | None = None, dry_run: bool = False, model: str | None = None,
                no_sandbox: bool = False) -> PlanResult:
    """`plan` with the backend `agent` names: the API (recorded), a replay of `recording`, or an
    agent CLI (a preset, an [agents.NAME], or `command` with `cmd`) that hands in through
    `specflux submit-tasks` (SPECFLUX_HANDIN), sandboxed unless `no_sandbox`."""
    from specflux.agent.presets import is_command_agent, resolve

    handin = None
    if is_command_agent(agent):
        from specflux.agent.command_backend import CommandBackend

        preset = resolve(agent, cmd, manager.ws.config.agents)
        from specflux.agent.handin_channel import HandinChannel

        handin = HandinChannel("plan", "tasks")  # a private folder and key for this session alone
        env = {"SPECFLUX_ROOT": str(manager.ws.root), "SPECFLUX_ROLE": "planner", **handin.env()}
        sandbox = "off" if no_sandbox else manager.ws.config.agent.sandbox
        backend = CommandBackend(cmd or preset.command, timeout_s=manager.ws.config.agent.session_timeout_s, env=env,
                                 preset=preset, role="planner", model=model, sandbox=sandbox)
    elif agent == "replay":
        from specflux.agent.anthropic_backend import replay_backend

        if not recording:
            raise UsageError("--agent replay needs --recording PATH")
        backend = replay_backend(Path(recording))
    else:
        from specflux.agent.anthropic_backend import live_backend

        backend = live_backend(new_recording(manager.ws))
    try:
        return plan(manager, prd, backend, dry_run=dry_run, command_agent=handin is not None, handin=handin,
                    model=model)
    finally:
        if handin is not None:
            handin.close()


def new_recording(ws) -> Path:
    ws.recordings_dir.mkdir(parents=True, exist_ok=True)
    return ws.recordings_dir / f"plan-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
