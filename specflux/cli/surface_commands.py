"""The commands that start the other surfaces: the MCP server, the HTML board, the demo."""

from __future__ import annotations

from pathlib import Path

from specflux.cli import command


@command("mcp")
def cmd_mcp(args) -> int:
    from specflux.mcp_server import serve

    return serve(args)


@command("board")
def cmd_board(args) -> int:
    from specflux.board.main import run_board

    return run_board(args)


@command("demo")
def cmd_demo(args) -> int:
    from specflux.demo.tour import run_demo

    return run_demo(Path(args.dir) if args.dir else None)
