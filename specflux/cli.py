"""The `specflux` command: parse arguments, call the library, print. Nothing else lives here.

argparse rather than typer/rich: `specflux list` must start fast (typer + rich cost ~90 ms of
imports), and every command's help is still generated from these definitions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from .errors import SpecfluxError

STATUSES = ("pending", "in_progress", "review", "complete", "failed", "blocked")  # as document.STATUSES
AGENTS = ("anthropic", "command", "replay")
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn):
        COMMANDS[name] = fn
        return fn

    return register


def emit_json(data) -> None:
    from .escape import safe_json

    print(safe_json(json.dumps(data, indent=2, ensure_ascii=False)))


def notices(outcome) -> None:
    for line in outcome.notices:
        print(f"specflux: {line}", file=sys.stderr)


def problems(lines) -> int:
    """Print each problem on stderr; 1 if there were any (the output above them still stands)."""
    from .escape import safe

    for line in lines:
        print(f"specflux: {safe(line)}", file=sys.stderr)
    return 1 if lines else 0


def _workspace(args):
    from .workspace import Workspace

    return Workspace.find(explicit=args.root)


def _manager(args, commit: bool = True):
    from .store import TaskStateManager

    ws = _workspace(args)
    return TaskStateManager(ws, git=commit and ws.config.commit)


# --------------------------------------------------------------------- task-state commands


@command("init")
def cmd_init(args) -> int:
    from .workspace import Workspace

    ws, created = Workspace.init(Path(args.dir or "."))
    print(f"{'created' if created else 'already present:'} {ws.dir}")
    return 0


@command("new")
def cmd_new(args) -> int:
    manager = _manager(args)
    outcome = manager.create(
        args.title,
        task_id=args.id,
        epic_id=args.epic,
        epic_title=args.epic_title,
        repository=args.repo,
        dependencies=args.dep or [],
        requirements=args.req or "",
        criteria=args.ac or [],
    )
    print(outcome.task_id)
    return 0


@command("list")
def cmd_list(args) -> int:
    from .escape import safe
    from .views import list_table, summary_json

    manager = _manager(args, commit=False)
    rows = manager.summaries(args.status)
    if args.json:
        emit_json([summary_json(r) for r in rows])
    elif rows:
        print(list_table(rows))  # escapes the text from task files itself, then colours it on a terminal
    else:
        print("no tasks" + (f" with status {args.status}" if args.status else "") + " (create one with `specflux new TITLE`)")
    broken = [r for r in rows if r.error]
    for r in broken:
        print(safe(str(r.error)), file=sys.stderr)
    return 1 if broken else 0


@command("show")
def cmd_show(args) -> int:
    from .views import show_text, task_json

    manager = _manager(args, commit=False)
    doc = manager.load(args.id)
    state = doc.to_state(args.id)
    size = len(doc.text.encode("utf-8"))
    rel = manager.ws.relative(manager.path(args.id))
    if args.json:
        emit_json(task_json(state, rel, size))
    else:
        from .escape import safe

        print(safe(show_text(state, rel, size)))
    return 0


def _ticked(args, checked: bool) -> int:
    from .escape import safe

    outcome = _manager(args, commit=False).set_checked(args.id, args.n, checked)  # never commits
    verb, state = ("checked", "already checked") if checked else ("unchecked", "already unchecked")
    for index, text, changed in outcome.criteria:
        print(f"task {outcome.task_id}: {verb if changed else state} {index}. {safe(text)}")
    return 0


@command("check")
def cmd_check(args) -> int:
    return _ticked(args, True)


@command("uncheck")
def cmd_uncheck(args) -> int:
    return _ticked(args, False)


@command("set")
def cmd_set(args) -> int:
    from .escape import safe

    if not any(v is not None and v != [] for v in (args.status, args.title, args.priority, args.add_dep, args.remove_dep)):
        from .errors import UsageError

        raise UsageError("nothing to set: give --status, --title, --priority, --add-dep or --remove-dep")
    outcome = _manager(args).update(args.id, status=args.status, title=args.title, priority=args.priority,
                                    add_deps=args.add_dep or [], remove_deps=args.remove_dep or [])
    for line in outcome.fields or ["nothing changed"]:
        print(f"task {outcome.task_id}: {safe(line)}")
    return 0


@command("delete")
def cmd_delete(args) -> int:
    manager = _manager(args)
    outcome = manager.delete(args.id, force=args.force)
    for line in outcome.fields:
        print(line)
    for path in outcome.changed:
        if not path.exists():
            print(f"deleted {manager.ws.relative(path)}")
    return 0


@command("session")
def cmd_session(args) -> int:
    from .model import SessionInput

    manager = _manager(args)
    entry = SessionInput(did=args.did, issues=args.issues or "", next=args.next or "")
    outcome = manager.append_session(args.id, entry, checks=args.check or [], commit=not args.no_commit)
    notices(outcome)
    done = f"task {outcome.task_id}: session {outcome.session} recorded"
    if outcome.commit:
        done += f" in commit {outcome.commit[:8]}"
    for line in outcome.archived:
        done += f"\narchived {line}"
    print(done)
    return 0


def refuse_complete_inside_run(task_id: str) -> None:
    """Inside a workflow run, the run completes its task (also for the MCP server's complete_task)."""
    import os

    if os.environ.get("SPECFLUX_RUN") and os.environ.get("SPECFLUX_ROLE") and \
            os.environ.get("SPECFLUX_TASK_ID") == task_id.lstrip("#"):
        from .errors import UsageError

        raise UsageError(f"inside workflow run {os.environ['SPECFLUX_RUN']}, the run completes task {task_id} when "
                         "the workflow accepts it: write `### Summary` and `### For Downstream Tasks` under "
                         "`## 4. Chain Output` in the task file instead")


@command("complete")
def cmd_complete(args) -> int:
    refuse_complete_inside_run(args.id)
    manager = _manager(args)
    outcome = manager.complete(args.id, args.summary, args.downstream, commit=not args.no_commit)
    notices(outcome)
    print(f"task {outcome.task_id}: complete" + (f" in commit {outcome.commit[:8]}" if outcome.commit else ""))
    for target in outcome.wired:
        print(f"wired into task {target}")
    return 0


@command("wire")
def cmd_wire(args) -> int:
    from .chain import wire

    changed, found = wire(_manager(args, commit=False), args.id)
    print("\n".join(f"updated {p}" for p in changed) or "chain inputs are up to date")
    return problems(found)


@command("archive")
def cmd_archive(args) -> int:
    from .archive import archive_task

    manager = _manager(args)
    ids = [args.id] if args.id else manager.ws.task_ids()
    moved = 0
    for task_id in ids:
        outcome = archive_task(manager, task_id, force=args.force, commit=not args.no_commit)
        notices(outcome)
        for line in outcome.archived:
            print(f"task {task_id}: archived {line}")
            moved += 1
    if not moved:
        print("nothing to archive" + ("" if args.force else " (files are under the size limit; --force archives anyway)"))
    return 0


@command("lint")
def cmd_lint(args) -> int:
    from .lint import lint_workspace
    from .workspace import Workspace

    paths = [Path(p) for p in args.paths]
    try:
        ws = Workspace.find(explicit=args.root, start=paths[0].resolve().parent if paths else None)
    except SpecfluxError:
        if not paths:
            raise
        ws = Workspace(paths[0].resolve().parent)
    problems = lint_workspace(ws, paths)
    errors = [p for p in problems if p.severity == "error"]
    if args.json:
        emit_json({"ok": not errors, "problems": [p.to_json() for p in problems]})
    else:
        for p in problems:
            print(p, file=sys.stderr if p.severity == "error" else sys.stdout)
        if not errors:
            print(f"ok: {len(paths) or len(ws.task_ids())} file(s)")
    return 1 if errors else 0


@command("ready")
def cmd_ready(args) -> int:
    from .chain import Graph

    graph = Graph.load(_manager(args, commit=False))
    ready = graph.ready()
    if args.json:
        from .views import ready_json

        emit_json(ready_json(graph))
    else:
        from .escape import safe
        from .views import table

        print(table(["ID", "STATUS", "TITLE"], [[t, graph.status[t], safe(graph.titles[t])] for t in ready], status_column=1)
              if ready else "no task is ready")
    return problems(graph.problems())


@command("graph")
def cmd_graph(args) -> int:
    from .chain import Graph

    from .escape import safe

    graph = Graph.load(_manager(args, commit=False))
    if args.json:
        from .views import graph_json

        emit_json(graph_json(graph))
    else:
        print(safe(graph.mermaid(), keep="\n"))
    return problems(graph.problems())


@command("log")
def cmd_log(args) -> int:
    from .history import task_history

    manager = _manager(args)
    manager.load(args.id)  # an unknown or broken task is an error, not an empty history
    entries = task_history(manager, args.id)
    if args.json:
        emit_json(entries)
        return 0
    if not entries:
        print(f"no commits touch task {args.id} yet")
        return 0
    from .views import table

    from .escape import safe

    rows = [[e["commit"][:8], e["date"][:16].replace("T", " "), str(e["session"] or "-"), e["status"] or "-", e["subject"]] for e in entries]
    print(safe(table(["COMMIT", "DATE", "SESSION", "STATUS", "SUBJECT"], rows)))
    return 0


# --------------------------------------------------------------------- agent commands


@command("context")
def cmd_context(args) -> int:
    from .agent.context import build_context

    manager = _manager(args, commit=False)
    ctx = build_context(manager, args.id)
    if args.json:
        from .views import context_json

        emit_json(context_json(ctx))
    else:
        print(ctx.system)
        print()
        print(ctx.user)
        print(f"\n[context: ~{ctx.tokens} tokens (estimated offline)]", file=sys.stderr)
    return 0


@command("run")
def cmd_run(args) -> int:
    from .agent.session import run_from_args

    return run_from_args(_manager(args, commit=not args.no_commit), args)


@command("plan")
def cmd_plan(args) -> int:
    from .escape import safe
    from .flow.plan import run_planner

    manager = _manager(args, commit=False)
    result = run_planner(manager, Path(args.prd), agent=args.agent, cmd=args.cmd, recording=args.recording,
                         dry_run=args.dry_run, model=args.model)
    if args.json:
        emit_json({"prd": result.prd, "summary": result.summary, "created": result.created, "tasks": [
            {"id": d.task_id, "key": d.key, "title": d.title, "priority": d.priority, "complexity": d.complexity,
             "dependencies": d.dependencies, "criteria": d.criteria} for d in result.drafts]})
        return 0
    from .views import table

    rows = [[d.task_id, str(d.priority), d.complexity, ",".join(d.dependencies) or "-", d.title] for d in result.drafts]
    print(safe(table(["ID", "PRIORITY", "COMPLEXITY", "DEPS", "TITLE"], rows)))
    s = result.summary
    by = ", ".join(f"priority {k}: {v}" for k, v in s["byPriority"].items())
    print(f"\n{s['totalTasks']} task(s) ({by}); estimated size: {s['estimatedComplexity']}")
    print("nothing was written (--dry-run)" if args.dry_run else f"created {', '.join(result.created)} from {result.prd}")
    return 0


@command("import")
def cmd_import(args) -> int:
    from .escape import safe
    from .importers.apply import apply, read_source

    manager = _manager(args, commit=False)
    source = Path(args.path).resolve()
    try:
        shown = source.relative_to(manager.ws.root).as_posix()
    except ValueError:
        shown = str(source)
    result = read_source(source, args.format, shown)
    done = apply(manager, result, dry_run=args.dry_run)
    for warning in done.warnings:
        print(safe(str(warning)), file=sys.stderr)
    if args.json:
        emit_json({"format": done.format, "created": done.created, "existing": done.existing,
                   "warnings": [{"path": w.path, "line": w.line, "message": w.message} for w in done.warnings],
                   "tasks": [{"id": d.task_id, "title": d.title, "status": d.status, "dependencies": d.dependencies,
                              "criteria": d.criteria, "metadata": d.metadata} for d in done.drafts]})
        return 0
    if args.dry_run:
        from .views import table

        rows = [[d.task_id, d.status, ",".join(d.dependencies) or "-", d.title] for d in done.drafts]
        print(safe(table(["ID", "STATUS", "DEPS", "TITLE"], rows)) if rows else "no tasks found")
        print(f"\n{len(done.created)} task(s) would be created, {len(done.existing)} exist already "
              f"({done.format}, {shown}); nothing was written")
        return 0
    print(f"{len(done.created)} task(s) created, {len(done.existing)} already there ({done.format}, {shown})"
          + (f"; {len(done.warnings)} warning(s)" if done.warnings else ""))
    return 0


@command("flow")
def cmd_flow(args) -> int:
    from .cli_flow import run_flow

    return run_flow(args, _manager)


@command("submit-review")
def cmd_submit_review(args) -> int:
    from .cli_flow import submit

    return submit("review", args)


@command("submit-tasks")
def cmd_submit_tasks(args) -> int:
    from .cli_flow import submit

    return submit("tasks", args)


@command("merge-driver")
def cmd_merge_driver(args) -> int:
    from .merge import run_driver

    return run_driver(args.base, args.ours, args.theirs, args.path)


@command("mcp")
def cmd_mcp(args) -> int:
    from .mcp_server import serve

    return serve(args)


@command("board")
def cmd_board(args) -> int:
    from .board import run_board

    return run_board(args)


@command("completion")
def cmd_completion(args) -> int:
    from .completion import script

    print(script(args.shell, build_parser()), end="")
    return 0


@command("demo")
def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(Path(args.dir) if args.dir else None)


# --------------------------------------------------------------------- arguments


class _Unused:
    """Takes the arguments of a command that is not being run (see `build_parser(only=...)`)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: self


def build_parser(full: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; `full=False` leaves out the flow commands (built only when asked
    for, so that `specflux list` does not pay for them); with `only`, that command's arguments
    alone (what `main` builds for a command line that names one: argparse spends ~5 ms on the
    arguments of them all)."""
    p = argparse.ArgumentParser(prog="specflux", description="Markdown task state for coding agents: one file per task.")
    p.add_argument("--root", help="the folder holding .specflux/ (default: search upwards; or SPECFLUX_ROOT)")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", help="`specflux COMMAND --help` for its options")

    def cmd(name, help, examples=None):
        if only is not None and name != only:
            return _Unused()
        return sub.add_parser(name, help=help, description=help, epilog=examples and "examples:\n" + examples,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    s = cmd("init", "create .specflux/ here (in a git repo or not)")
    s.add_argument("dir", nargs="?", metavar="DIR", help="where to create it (default: the current folder)")

    s = cmd("new", "create a task from the template; prints its id", """\
  specflux new "Auth API endpoints" --dep 100 --dep 101 --ac "POST /auth/login returns a JWT" \\
      --ac "POST /auth/logout invalidates the refresh token" --req "REST endpoints for login and logout."
  specflux new "JWT service" --id T3 --epic 10 --epic-title "User authentication" --repo backend""")
    s.add_argument("title", metavar="TITLE", help="the task's title (quote it)")
    s.add_argument("--id", metavar="ID", help="the task's id: a number or a slug such as T3 (default: the next number)")
    s.add_argument("--epic", metavar="ID", help="the epic's id")
    s.add_argument("--epic-title", metavar="TEXT", help="the epic's title")
    s.add_argument("--repo", metavar="NAME", help="repository name")
    s.add_argument("--dep", action="append", metavar="ID", help="a task this one depends on (repeatable)")
    s.add_argument("--req", metavar="TEXT", help="requirements, 2-5 sentences")
    s.add_argument("--ac", action="append", metavar="TEXT", help="an acceptance criterion (repeatable)")

    s = cmd("list", "one row per task: id, status, criteria done/total, sessions, size, dependencies, title")
    s.add_argument("--status", choices=[*STATUSES, "broken"], metavar="STATUS",
                   help=f"only tasks with this status: {', '.join(STATUSES)}, or broken (unreadable files)")
    s.add_argument("--json", action="store_true", help="the rows as JSON: [{id, title, status, criteria, sessions, "
                   "size_bytes, dependencies, path, error, warnings}]")

    s = cmd("show", "the parsed task")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--json", action="store_true", help="the whole task as JSON (CONTRACT section 3)")

    for name, verb in (("check", "tick"), ("uncheck", "untick")):
        s = cmd(name, f"{verb} acceptance criteria by 1-based index")
        s.add_argument("id", metavar="ID", help="the task's id")
        s.add_argument("n", nargs="+", type=int, metavar="N", help=f"the criteria to {verb}, as `show` numbers them")

    s = cmd("set", "change a task's fields; each change rewrites only its own line(s)", """\
  specflux set 102 --status review
  specflux set 102 --priority 1 --add-dep 101 --remove-dep 99
  specflux set 102 --title 'Auth API endpoints (v2)'""")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--status", choices=STATUSES, metavar="STATUS", help=f"one of: {', '.join(STATUSES)}")
    s.add_argument("--title", metavar="TEXT", help="the new title")
    s.add_argument("--priority", type=int, metavar="N", help="1 (highest) to 5 (lowest)")
    s.add_argument("--add-dep", action="append", metavar="ID", help="a task this one depends on (repeatable)")
    s.add_argument("--remove-dep", action="append", metavar="ID", help="a dependency to drop (repeatable)")

    s = cmd("delete", "remove a task file (and its archive)")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--force", action="store_true", help="even when other tasks depend on it (also removes it from their dependencies)")

    s = cmd("session", "append a progress-log session and commit it", """\
  specflux session 102 --did "login endpoint" --did "its tests" --next "logout and refresh" --check 1
  specflux session 102 --did "spike on token storage" --issues "CI is flaky on macOS" --no-commit""")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--did", action="append", required=True, metavar="TEXT", help="what was done (repeat for several bullets)")
    s.add_argument("--issues", metavar="TEXT", help="problems met (default: None)")
    s.add_argument("--next", metavar="TEXT", help="what the next session should do")
    s.add_argument("--check", action="append", type=int, metavar="N", help="also tick criterion N (repeatable)")
    s.add_argument("--no-commit", action="store_true", help="write the task file but do not commit it")

    s = cmd("complete", "write the chain output, set status complete, wire it into dependent tasks, commit", """\
  specflux complete 101 --summary "JWTService: generateToken, verifyToken, refreshToken" \\
      --downstream "import { JWTService } from src/auth/jwt.ts; tokens expire after 15 minutes"
  specflux complete 305 --summary "The login button is enabled once both fields are filled" --no-commit""")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--summary", required=True, metavar="TEXT", help="what the task built (### Summary of its chain output)")
    s.add_argument("--downstream", metavar="TEXT", help="API contracts and integration notes for dependent tasks")
    s.add_argument("--no-commit", action="store_true", help="write the files but do not commit them")

    s = cmd("wire", "refresh the chain inputs of the tasks that depend on ID (or on any task)")
    s.add_argument("id", nargs="?", metavar="ID", help="the upstream task (default: every complete task)")

    s = cmd("archive", "move old sessions to .specflux/archives/ by the size rules")
    s.add_argument("id", nargs="?", metavar="ID", help="the task's id (default: every task)")
    s.add_argument("--force", action="store_true", help="archive even under the size limit")
    s.add_argument("--no-commit", action="store_true", help="move the sessions but do not commit")

    s = cmd("lint", "validate task files; exit 1 with path:line: message per problem")
    s.add_argument("paths", nargs="*", metavar="PATH", help="task files to check (default: every task file)")
    s.add_argument("--json", action="store_true", help="{ok, problems: [{path, line, message, severity}]} as JSON")

    s = cmd("ready", "tasks whose dependencies are all complete, in dependency order")
    s.add_argument("--json", action="store_true", help="the ready tasks as JSON, each row as `list --json` has it")

    s = cmd("log", "the task's history from git")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--json", action="store_true", help="the commits as JSON, with session, status and usage")

    s = cmd("graph", "the dependency graph as a Mermaid flowchart")
    s.add_argument("--json", action="store_true", help="nodes, edges, missing tasks, cycles and problems as JSON")

    s = cmd("context", "the exact context an agent session on ID receives, with a token estimate")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--json", action="store_true", help="{system, context, tokens, links} as JSON")

    s = cmd("run", "run one agent session on a task", """\
  specflux run 102                      # the Anthropic API (ANTHROPIC_API_KEY)
  specflux run 102 --agent command --cmd "claude -p --output-format json" --timeout 1800
  specflux run 102 --agent replay --recording .specflux/recordings/SESSION.jsonl""")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--agent", choices=AGENTS, default="anthropic",
                   help="anthropic (the Messages API, default), command (an agent CLI) or replay (a recording)")
    s.add_argument("--cmd", help="the agent command line (--agent command)")
    s.add_argument("--recording", metavar="FILE", help="a JSONL recording to replay (--agent replay)")
    s.add_argument("--model", help="the model (default: [agent] model in config.toml)")
    s.add_argument("--max-turns", type=int, metavar="N", help="agent turns before the session is stopped")
    s.add_argument("--token-budget", type=int, metavar="N", help="tokens the session may spend")
    s.add_argument("--timeout", type=float, metavar="SECONDS", help="seconds before a command agent is stopped")
    s.add_argument("--no-commit", action="store_true", help="leave the session's changes uncommitted")

    s = cmd("plan", "a planner agent turns a requirements document into task files", """\
  specflux plan docs/prd.md --dry-run   # show the tasks, write nothing
  specflux plan docs/prd.md --agent command --cmd "claude -p --output-format json"
  specflux plan docs/prd.md --json""")
    s.add_argument("prd", metavar="PRD", help="the requirements document (linked from each task, not copied)")
    s.add_argument("--dry-run", action="store_true", help="show the tasks and write nothing")
    s.add_argument("--agent", choices=AGENTS, default="anthropic",
                   help="anthropic (the Messages API, default), command (an agent CLI) or replay (a recording)")
    s.add_argument("--cmd", help="the agent command line (--agent command); it hands in with specflux submit-tasks")
    s.add_argument("--recording", metavar="FILE", help="a JSONL recording to replay (--agent replay)")
    s.add_argument("--model", help="the model (default: [agent] model in config.toml)")
    s.add_argument("--json", action="store_true", help="{prd, summary, created, tasks} as JSON")

    s = cmd("import", "task files from a spec-kit tasks.md, a Backlog.md folder, a Taskmaster tasks.json or a "
                      "harness feature_list.json", """\
  specflux import specs/001-auth/tasks.md --dry-run
  specflux import backlog/
  specflux import .taskmaster/tasks/tasks.json --format taskmaster --json""")
    s.add_argument("path", metavar="PATH", help="the file or folder to import")
    s.add_argument("--format", choices=["spec-kit", "backlog", "taskmaster", "harness"],
                   help="the source's format (default: from the path and its content)")
    s.add_argument("--dry-run", action="store_true", help="show the tasks and write nothing")
    s.add_argument("--json", action="store_true", help="{format, created, existing, warnings, tasks} as JSON")

    s = cmd("merge-driver", "git's merge driver for task files (registered by init): merge BASE, OURS and THEIRS "
                            "by parts into OURS; exit 1 when conflicts are left")
    s.add_argument("base", metavar="BASE", help="the common ancestor (%%O)")
    s.add_argument("ours", metavar="OURS", help="our version; the result is written here (%%A)")
    s.add_argument("theirs", metavar="THEIRS", help="their version (%%B)")
    s.add_argument("path", nargs="?", metavar="PATH", help="the file's path in the repository, for messages (%%P)")

    s = cmd("mcp", "serve the task tools to an MCP client (Claude Code, Codex, Cursor, ...) on stdio", """\
  claude mcp add specflux -- specflux mcp
  specflux mcp --tools list_tasks,show_task""")
    s.add_argument("--tools", metavar="LIST", help="comma-separated tool names to offer (default: all)")

    s = cmd("board", "one self-contained HTML page: tasks by status, the dependency graph, runs", """\
  specflux board                        # writes .specflux/board.html
  specflux board --serve --port 8000""")
    s.add_argument("--out", metavar="FILE", help="where to write the page (default: .specflux/board.html)")
    s.add_argument("--serve", action="store_true", help="serve the page locally and refresh it when files change")
    s.add_argument("--port", type=int, default=0, metavar="N", help="the port for --serve (default: a free one)")
    s.add_argument("--host", default="127.0.0.1", metavar="HOST", help="the address for --serve (default: 127.0.0.1)")

    s = cmd("completion", "print a shell completion script", """\
  specflux completion bash > ~/.local/share/bash-completion/completions/specflux
  specflux completion zsh > ~/.zfunc/_specflux     # with fpath+=(~/.zfunc) before compinit in ~/.zshrc
  specflux completion fish > ~/.config/fish/completions/specflux.fish""")
    s.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell the script is for")

    s = cmd("demo", "a complete offline walk-through in a fresh folder")
    s.add_argument("dir", nargs="?", metavar="DIR", help="the folder to create (default: a new temporary folder)")

    if full:
        from .cli_flow import add_parsers

        add_parsers(sub)
    return p


def argv_needs_flow(argv) -> bool:
    """Whether the command line asks for a flow command (or for help)."""
    words = sys.argv[1:] if argv is None else list(argv)
    return not words or any(w in ("flow", "submit-review", "submit-tasks", "-h", "--help") for w in words)


def _version() -> str:
    from . import __version__

    return __version__


def _named_command(argv: Sequence[str]) -> str | None:
    """The command `argv` runs when that is plain to see (only `--root DIR` before it), else None."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
        if arg.startswith("--root="):
            i += 1
        elif arg == "--root":
            i += 2
        else:  # --help, --version, an abbreviation: the full parser decides
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(full=argv_needs_flow(argv), only=_named_command(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except SpecfluxError as e:
        from .escape import safe

        print(safe(f"specflux: {e}" if not e.path else str(e)), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("specflux: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # what the file system refused where no file-level check caught it first
        where = f"{e.filename}: " if e.filename else ""
        print(f"specflux: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except RecursionError:
        print("specflux: a file nests too deeply to read", file=sys.stderr)
        return 1


def run() -> None:
    """The `specflux` program: `main` with the process's Ctrl-C policy. The first Ctrl-C interrupts
    (the command records and undoes what it must); every later one is ignored, so that pressing it
    again and again never cuts the clean-up short or prints a traceback on the way out."""
    import signal

    interrupted = False

    def on_interrupt(signum, frame):
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # started ignoring it (nohup, &): keep that
        signal.signal(signal.SIGINT, on_interrupt)
    sys.exit(main())


if __name__ == "__main__":
    run()
