"""`specflux board`: write the page, or serve the control room (`--serve`)."""

from __future__ import annotations

import sys
from pathlib import Path


def run_board(args) -> int:
    from specflux.base.errors import UsageError
    from specflux.base.escape import safe
    from specflux.board.page import write_board
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace, ensure_ignored

    ws = Workspace.find(explicit=args.root)
    manager = TaskStateManager(ws, git=True)  # git for the history, and for what the page's edits commit
    if args.serve:
        from specflux.board.server import serve

        return serve(manager, args.host, args.port, Path(args.out) if args.out else None,
                     read_only=args.read_only, remote=args.remote)
    if args.read_only or args.remote:
        raise UsageError("--read-only and --remote are for the served page: add --serve")
    out = Path(args.out) if args.out else ws.dir / "board.html"
    data = write_board(manager, out)
    if not args.out:
        ensure_ignored(ws.dir)
    print(safe(str(out.resolve())))
    for line in data["problems"]:
        print(f"specflux: {safe(line)}", file=sys.stderr)
    return 1 if data["problems"] else 0
