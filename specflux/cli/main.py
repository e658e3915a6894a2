"""The `specflux` command: parse arguments (their definitions: cli_parser.py), call the library,
print. Nothing else lives here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from specflux.cli.parser import argv_needs_flow, build_parser
from specflux.base.errors import SpecfluxError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn):
        COMMANDS[name] = fn
        return fn

    return register


def emit_json(data) -> None:
    from specflux.base.escape import safe_json

    print(safe_json(json.dumps(data, indent=2, ensure_ascii=False)))


def notices(outcome) -> None:
    for line in outcome.notices:
        print(f"specflux: {line}", file=sys.stderr)


def problems(lines) -> int:
    """Print each problem on stderr; 1 if there were any (the output above them still stands)."""
    from specflux.base.escape import safe

    for line in lines:
        print(f"specflux: {safe(line)}", file=sys.stderr)
    return 1 if lines else 0


def _workspace(args):
    from specflux.store.workspace import Workspace

    return Workspace.find(explicit=args.root)


def _manager(args, commit: bool = True):
    from specflux.store.manager import TaskStateManager

    ws = _workspace(args)
    return TaskStateManager(ws, git=commit and ws.config.commit)


# --------------------------------------------------------------------- task-state commands


@command("init")
def cmd_init(args) -> int:
    from specflux.store.workspace import Workspace

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
    from specflux.base.escape import safe
    from specflux.surface.views import list_table, summary_json

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
    from specflux.surface.views import show_text, task_json

    manager = _manager(args, commit=False)
    doc = manager.load(args.id)
    state = doc.to_state(args.id)
    size = len(doc.text.encode("utf-8"))
    rel = manager.ws.relative(manager.path(args.id))
    if args.json:
        emit_json(task_json(state, rel, size))
    else:
        from specflux.base.escape import safe

        print(safe(show_text(state, rel, size)))
    return 0


def _ticked(args, checked: bool) -> int:
    from specflux.base.escape import safe

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
    from specflux.base.escape import safe

    if not any(v is not None and v != [] for v in (args.status, args.title, args.priority, args.add_dep, args.remove_dep)):
        from specflux.base.errors import UsageError

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
    from specflux.format.model import SessionInput

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
        from specflux.base.errors import UsageError

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
    from specflux.store.chain import wire

    changed, found = wire(_manager(args, commit=False), args.id)
    print("\n".join(f"updated {p}" for p in changed) or "chain inputs are up to date")
    return problems(found)


@command("archive")
def cmd_archive(args) -> int:
    from specflux.store.archive import archive_task

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
    from specflux.store.lint import lint_workspace
    from specflux.store.workspace import Workspace

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
    from specflux.store.chain import Graph

    graph = Graph.load(_manager(args, commit=False))
    ready = graph.ready()
    if args.json:
        from specflux.surface.views import ready_json

        emit_json(ready_json(graph))
    else:
        from specflux.base.escape import safe
        from specflux.surface.views import table

        print(table(["ID", "STATUS", "TITLE"], [[t, graph.status[t], safe(graph.titles[t])] for t in ready], status_column=1)
              if ready else "no task is ready")
    return problems(graph.problems())


@command("graph")
def cmd_graph(args) -> int:
    from specflux.store.chain import Graph

    from specflux.base.escape import safe

    graph = Graph.load(_manager(args, commit=False))
    if args.json:
        from specflux.surface.views import graph_json

        emit_json(graph_json(graph))
    else:
        print(safe(graph.mermaid(), keep="\n"))
    return problems(graph.problems())


@command("log")
def cmd_log(args) -> int:
    from specflux.store.history import task_history

    manager = _manager(args)
    manager.load(args.id)  # an unknown or broken task is an error, not an empty history
    entries = task_history(manager, args.id)
    if args.json:
        emit_json(entries)
        return 0
    if not entries:
        print(f"no commits touch task {args.id} yet")
        return 0
    from specflux.surface.views import table

    from specflux.base.escape import safe

    rows = [[e["commit"][:8], e["date"][:16].replace("T", " "), str(e["session"] or "-"), e["status"] or "-", e["subject"]] for e in entries]
    print(safe(table(["COMMIT", "DATE", "SESSION", "STATUS", "SUBJECT"], rows)))
    return 0


# --------------------------------------------------------------------- agent commands


@command("context")
def cmd_context(args) -> int:
    from specflux.agent.context import build_context

    manager = _manager(args, commit=False)
    ctx = build_context(manager, args.id)
    if args.json:
        from specflux.surface.views import context_json

        emit_json(context_json(ctx))
    else:
        print(ctx.system)
        print()
        print(ctx.user)
        print(f"\n[context: ~{ctx.tokens} tokens (estimated offline)]", file=sys.stderr)
    return 0


@command("run")
def cmd_run(args) -> int:
    from specflux.agent.session import run_from_args

    return run_from_args(_manager(args, commit=not args.no_commit), args)


@command("plan")
def cmd_plan(args) -> int:
    from specflux.base.escape import safe
    from specflux.flow.plan import run_planner

    manager = _manager(args, commit=False)
    result = run_planner(manager, Path(args.prd), agent=args.agent, cmd=args.cmd, recording=args.recording,
                         dry_run=args.dry_run, model=args.model)
    if args.json:
        emit_json({"prd": result.prd, "summary": result.summary, "created": result.created, "tasks": [
            {"id": d.task_id, "key": d.key, "title": d.title, "priority": d.priority, "complexity": d.complexity,
             "dependencies": d.dependencies, "criteria": d.criteria} for d in result.drafts]})
        return 0
    from specflux.surface.views import table

    rows = [[d.task_id, str(d.priority), d.complexity, ",".join(d.dependencies) or "-", d.title] for d in result.drafts]
    print(safe(table(["ID", "PRIORITY", "COMPLEXITY", "DEPS", "TITLE"], rows)))
    s = result.summary
    by = ", ".join(f"priority {k}: {v}" for k, v in s["byPriority"].items())
    print(f"\n{s['totalTasks']} task(s) ({by}); estimated size: {s['estimatedComplexity']}")
    print("nothing was written (--dry-run)" if args.dry_run else f"created {', '.join(result.created)} from {result.prd}")
    return 0


@command("import")
def cmd_import(args) -> int:
    from specflux.base.escape import safe
    from specflux.importers.apply import apply, read_source

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
        from specflux.surface.views import table

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
    from specflux.cli.flow_commands import run_flow

    return run_flow(args, _manager)


@command("submit-review")
def cmd_submit_review(args) -> int:
    from specflux.cli.flow_commands import submit

    return submit("review", args)


@command("submit-tasks")
def cmd_submit_tasks(args) -> int:
    from specflux.cli.flow_commands import submit

    return submit("tasks", args)


@command("merge-driver")
def cmd_merge_driver(args) -> int:
    from specflux.vcs.merge_driver import run_driver

    return run_driver(args.base, args.ours, args.theirs, args.path)


@command("mcp")
def cmd_mcp(args) -> int:
    from specflux.mcp_server import serve

    return serve(args)


@command("board")
def cmd_board(args) -> int:
    from specflux.board.page import run_board

    return run_board(args)


@command("completion")
def cmd_completion(args) -> int:
    from specflux.cli.completion import script

    print(script(args.shell, build_parser()), end="")
    return 0


@command("demo")
def cmd_demo(args) -> int:
    from specflux.demo.tour import run_demo

    return run_demo(Path(args.dir) if args.dir else None)


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
        from specflux.base.escape import safe

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
            from specflux.base import interrupts

            interrupts.pressed = True
            raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # started ignoring it (nohup, &): keep that
        signal.signal(signal.SIGINT, on_interrupt)
    sys.exit(main())

