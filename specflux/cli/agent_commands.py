"""The agent commands: the context a session on a task receives, one agent session on a task, and
a planner agent turning a requirements document into task files."""

from __future__ import annotations

import sys
from pathlib import Path

from specflux.cli import command
from specflux.cli.output import emit_json
from specflux.surface.tasks import open_manager


@command("context")
def cmd_context(args) -> int:
    from specflux.agent.context import build_context

    manager = open_manager(args.root, commit=False)
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

    return run_from_args(open_manager(args.root, commit=not args.no_commit), args)


@command("plan")
def cmd_plan(args) -> int:
    from specflux.base.escape import safe
    from specflux.flow.plan import run_planner

    manager = open_manager(args.root, commit=False)
    result = run_planner(manager, Path(args.prd), agent=args.agent, cmd=args.cmd, recording=args.recording,
                         dry_run=args.dry_run, model=args.model, no_sandbox=args.no_sandbox)
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
