"""`specflux import`: task files from a spec-kit tasks.md, a Backlog.md folder, a Taskmaster
tasks.json or a harness feature_list.json (`specflux.importers`), or with --dry-run what would be."""

from __future__ import annotations

import sys
from pathlib import Path

from specflux.cli import command
from specflux.cli.output import emit_json
from specflux.surface.tasks import open_manager


@command("import")
def cmd_import(args) -> int:
    from specflux.base.escape import safe
    from specflux.importers.apply import apply, read_source

    manager = open_manager(args.root, commit=False)
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
                   "summary": {"created": len(done.created), "existing": len(done.existing),
                               "warnings": len(done.warnings), "kept_verbatim": done.kept},
                   "warnings": [{"path": w.path, "line": w.line, "message": w.message} for w in done.warnings],
                   "tasks": [{"id": d.task_id, "title": d.title, "status": d.status, "dependencies": d.dependencies,
                              "criteria": d.criteria, "metadata": d.metadata} for d in done.drafts]})
        return 0
    if args.dry_run:
        from specflux.surface.views import table

        rows = [[d.task_id, d.status, ",".join(d.dependencies) or "-", d.title] for d in done.drafts]
        print(safe(table(["ID", "STATUS", "DEPS", "TITLE"], rows)) if rows else "no tasks found")
        print(f"\n{len(done.created)} task(s) would be created, {len(done.existing)} exist already, "
              f"{len(done.warnings)} warning(s), {done.kept} line(s) would be kept verbatim "
              f"({done.format}, {shown}); nothing was written")
        return 0
    print(f"{done.summary()} ({done.format}, {shown})")
    return 0
