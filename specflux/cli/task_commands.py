"""The task-state commands: create, read, tick, change, log, complete, wire, archive and lint task
files, and git's merge driver for them. Each reads its arguments, calls the store, prints."""

from __future__ import annotations

import sys
from pathlib import Path

from specflux.base.errors import SpecfluxError
from specflux.cli import command
from specflux.cli.output import emit_json, notices, problems
from specflux.surface.tasks import open_manager, refuse_complete_inside_run


@command("init")
def cmd_init(args) -> int:
    import shlex

    from specflux.store.setup_check import refuse_nested, uncommitted_setup
    from specflux.store.workspace import Workspace

    root = Path(args.dir or ".")
    if not args.nested and not (root / ".specflux").is_dir():
        refuse_nested(root)
    ws, created = Workspace.init(root)
    print(f"{'created' if created else 'already present:'} {ws.dir}")
    todo = uncommitted_setup(ws.root)
    if todo:  # a run, a lane and a clone see only what is committed
        git = f"git -C {shlex.quote(args.dir)}" if args.dir else "git"
        print(f"next: commit {' and '.join(todo)} ({git} add {' '.join(todo)} && {git} commit -m 'specflux workspace'), "
              "so that runs, worktrees and clones have them")
    return 0


@command("new")
def cmd_new(args) -> int:
    from specflux.store.chain import refuse_unknown
    from specflux.store.workspace import check_id

    manager = open_manager(args.root)
    if not args.force:  # a task that waits on one not written yet: --force (lint and ready name it meanwhile)
        own = check_id(args.id) if args.id else None
        refuse_unknown(manager, [d for d in map(check_id, args.dep or []) if d != own])
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

    manager = open_manager(args.root, commit=False)
    rows = manager.summaries(args.status, cached=True)  # display only: the cache may serve it
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

    from specflux.store.workspace import check_id

    task_id = check_id(args.id)  # `show '#2'` is task 2
    manager = open_manager(args.root, commit=False)
    doc = manager.load(task_id)
    state = doc.to_state(task_id)
    size = len(doc.text.encode("utf-8"))
    rel = manager.ws.relative(manager.path(task_id))
    if args.json:
        emit_json(task_json(state, rel, size))
    else:
        from specflux.base.escape import safe

        print(safe(show_text(state, rel, size)))
    return 0


def _ticked(args, checked: bool) -> int:
    from specflux.base.escape import safe

    outcome = open_manager(args.root, commit=False).set_checked(args.id, args.n, checked)  # never commits
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

    fields = (args.status, args.title, args.priority, args.add_dep, args.remove_dep)
    if not any(v is not None and v != [] for v in fields) and args.req is None:
        from specflux.base.errors import UsageError

        raise UsageError("nothing to set: give --status, --title, --priority, --add-dep, --remove-dep or --req")
    manager = open_manager(args.root)
    lines = []
    if args.req is not None:  # checked first: a refusal of either part changes nothing
        from specflux.store.requirements import check_requirements, set_requirements

        check_requirements(manager, args.id, args.req)
    if any(v is not None and v != [] for v in fields):
        outcome = manager.update(args.id, status=args.status, title=args.title, priority=args.priority,
                                 add_deps=args.add_dep or [], remove_deps=args.remove_dep or [])
        lines += outcome.fields
    if args.req is not None:
        lines += set_requirements(manager, args.id, args.req).fields
    for line in lines or ["nothing changed"]:
        print(f"task {args.id.lstrip('#')}: {safe(line)}")
    return 0


@command("delete")
def cmd_delete(args) -> int:
    manager = open_manager(args.root)
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

    manager = open_manager(args.root)
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


@command("complete")
def cmd_complete(args) -> int:
    refuse_complete_inside_run(args.id)
    manager = open_manager(args.root)
    outcome = manager.complete(args.id, args.summary, args.downstream, commit=not args.no_commit)
    notices(outcome)
    print(f"task {outcome.task_id}: complete" + (f" in commit {outcome.commit[:8]}" if outcome.commit else ""))
    for target in outcome.wired:
        print(f"wired into task {target}")
    return 0


@command("handoff")
def cmd_handoff(args) -> int:
    from specflux.store.chain_output import write_chain_output

    outcome = write_chain_output(open_manager(args.root, commit=False), args.id, args.summary, args.downstream)
    notices(outcome)
    print(f"task {outcome.task_id}: chain output written (not complete: `specflux complete`, or the run, decides)")
    return 0


@command("wire")
def cmd_wire(args) -> int:
    from specflux.store.chain import wire

    changed, found = wire(open_manager(args.root, commit=False), args.id)
    print("\n".join(f"updated {p}" for p in changed) or "chain inputs are up to date")
    return problems(found)


@command("archive")
def cmd_archive(args) -> int:
    from specflux.store.archive import archive_task

    manager = open_manager(args.root)
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

    graph = Graph.load(open_manager(args.root, commit=False))
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

    graph = Graph.load(open_manager(args.root, commit=False))
    if args.json:
        from specflux.surface.views import graph_json

        emit_json(graph_json(graph))
    else:
        print(safe(graph.mermaid(), keep="\n"))
    return problems(graph.problems())


@command("log")
def cmd_log(args) -> int:
    from specflux.store.history import task_history

    manager = open_manager(args.root)
    manager.load(args.id)  # an unknown or broken task is an error, not an empty history
    entries = task_history(manager, args.id)
    if args.json:
        emit_json(entries)
        return 0
    if not entries:
        print(f"no commits touch task {args.id} yet")
        return 0
    from specflux.surface.views import spent_text, table

    from specflux.base.escape import safe

    rows = [[e["commit"][:8], e["date"][:16].replace("T", " "), str(e["session"] or "-"), e["status"] or "-",
             spent_text(e.get("usage")), e["subject"]] for e in entries]
    print(safe(table(["COMMIT", "DATE", "SESSION", "STATUS", "SPENT", "SUBJECT"], rows)))
    return 0


@command("merge-driver")
def cmd_merge_driver(args) -> int:
    from specflux.vcs.merge_driver import run_driver

    return run_driver(args.base, args.ours, args.theirs, args.path)
