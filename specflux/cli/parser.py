"""The arguments of every `specflux` command: one argparse parser, with help and examples, that
`main.py` parses with and `completion.py` reads.

argparse rather than typer/rich: `specflux list` must start fast (typer + rich cost ~90 ms of
imports), and every command's help is still generated from these definitions.
"""

from __future__ import annotations

import argparse
import os
import sys

STATUSES = ("pending", "in_progress", "review", "complete", "failed", "blocked")  # as format.metadata.STATUSES
AGENTS = ("anthropic", "command", "replay")  # then the presets (agent/presets.py), and [agents.NAME] of config.toml


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with "did you mean" after an invalid choice (`specflux flwo`, `flow strat`)."""

    def error(self, message):
        import difflib
        import re

        found = re.match(r"argument .*?: invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        if found:
            close = difflib.get_close_matches(found.group(1), re.findall(r"'([^']*)'", found.group(2)), n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)

    def _get_formatter(self):
        # argparse's own reads the terminal's width through shutil (which imports bz2, lzma and
        # zlib: ~2 ms of `show`), even when it only checks an argument as it is added
        return self.formatter_class(prog=self.prog, width=_width())


def _width() -> int:
    """shutil.get_terminal_size().columns - 2, as argparse's formatter takes it, without shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


class _Unused:
    """Takes the arguments of a command that is not being run (see `build_parser(only=...)`)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: self


def _agent_options(s, cmd_note: str = "") -> None:
    """--agent, --cmd, --recording and --model, as `run` and `plan` take them."""
    if isinstance(s, _Unused):
        return  # another command's line: the presets are not even imported
    from specflux.agent.presets import AgentNames, agent_help

    s.add_argument("--agent", choices=AgentNames(), default="anthropic", metavar="AGENT", help=agent_help())
    s.add_argument("--cmd", help=f"the agent command line (--agent command){cmd_note}")
    s.add_argument("--no-sandbox", action="store_true", help="run an agent CLI unconfined (by default it writes only "
                   "inside the repository, as [agent] sandbox says)")
    s.add_argument("--recording", metavar="FILE", help="a JSONL recording to replay (--agent replay)")
    s.add_argument("--model", help="the model (default: [agent] model in config.toml)")


def build_parser(full: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; `full=False` leaves out the flow commands (built only when asked
    for, so that `specflux list` does not pay for them); with `only`, that command's arguments
    alone (what `main` builds for a command line that names one: argparse spends ~5 ms on the
    arguments of them all)."""
    p = _Parser(prog="specflux", description="Markdown task state for coding agents: one file per task.")
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
    s.add_argument("--nested", action="store_true", help="create it even inside another workspace's folder (whose "
                   "tasks it then hides from the commands run below it)")

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
    s.add_argument("--force", action="store_true", help="accept a --dep on a task that does not exist yet (`lint` and "
                   "`ready` name it until it does)")

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
  specflux set 102 --title 'Auth API endpoints (v2)'
  specflux set 102 --req 'Create REST endpoints for login, logout and token refresh.'""")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--status", choices=STATUSES, metavar="STATUS", help=f"one of: {', '.join(STATUSES)}")
    s.add_argument("--title", metavar="TEXT", help="the new title")
    s.add_argument("--priority", type=int, metavar="N", help="1 (highest) to 5 (lowest)")
    s.add_argument("--add-dep", action="append", metavar="ID", help="a task this one depends on (repeatable)")
    s.add_argument("--remove-dep", action="append", metavar="ID", help="a dependency to drop (repeatable)")
    s.add_argument("--req", metavar="TEXT", help="new requirements: the text under ### Requirements, replaced")

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

    s = cmd("handoff", "write the task's chain output without completing it (what an agent CLI does inside a run)", """\
  specflux handoff 101 --summary "JWTService: generateToken, verifyToken" --downstream "import { JWTService } from src/auth/jwt.ts"
  specflux handoff "$SPECFLUX_TASK_ID" --summary "README.md documents add"     # a coder inside a workflow run""")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--summary", required=True, metavar="TEXT", help="what the task built (### Summary of its chain output)")
    s.add_argument("--downstream", metavar="TEXT", help="API contracts and integration notes for dependent tasks")

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

    s = cmd("stats", "tokens and cost of the agent sessions, per task and model and in total (from git)")
    s.add_argument("--json", action="store_true", help="per task, run and model and in total, as JSON")

    s = cmd("graph", "the dependency graph as a Mermaid flowchart")
    s.add_argument("--json", action="store_true", help="nodes, edges, missing tasks, cycles and problems as JSON")

    s = cmd("context", "the exact context an agent session on ID receives, with a token estimate")
    s.add_argument("id", metavar="ID", help="the task's id")
    s.add_argument("--json", action="store_true", help="{system, context, tokens, links} as JSON")

    s = cmd("run", "run one agent session on a task", """\
  specflux run 102                      # the Anthropic API (ANTHROPIC_API_KEY)
  specflux run 102 --agent claude       # Claude Code, headless, sandboxed
  specflux run 102 --agent command --cmd "my-agent --headless" --timeout 1800
  specflux run 102 --agent replay --recording .specflux/recordings/SESSION.jsonl""")
    s.add_argument("id", metavar="ID", help="the task's id")
    _agent_options(s)
    s.add_argument("--max-turns", type=int, metavar="N", help="agent turns before the session is stopped")
    s.add_argument("--token-budget", type=int, metavar="N", help="tokens the session may spend")
    s.add_argument("--timeout", type=float, metavar="SECONDS", help="seconds before a command agent is stopped")
    s.add_argument("--no-commit", action="store_true", help="leave the session's changes uncommitted")

    s = cmd("plan", "a planner agent turns a requirements document into task files", """\
  specflux plan docs/prd.md --dry-run   # show the tasks, write nothing
  specflux plan docs/prd.md --agent claude
  specflux plan docs/prd.md --json""")
    s.add_argument("prd", metavar="PRD", help="the requirements document (linked from each task, not copied)")
    s.add_argument("--dry-run", action="store_true", help="show the tasks and write nothing")
    _agent_options(s, "; it hands in with specflux submit-tasks")
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

    s = cmd("claims", "the shared queue's claims on a git remote: task, worker, run, lease left, stale; and "
                      "completions no integration made", """\
  specflux claims                       # on the remote origin
  specflux claims --remote team --json
  specflux claims release 7             # free task 7's claim (a stale one; a live one needs --force)
  specflux claims confirm 2             # vouch for task 2's completion made outside the queue""")
    s.add_argument("action", nargs="?", choices=["release", "confirm"], help="release: give up the claim on ID by "
                   "hand; confirm: record that the completion of ID (made by a push, not an integration) is good, "
                   "so that its dependents go ahead")
    s.add_argument("ids", nargs="*", metavar="ID", help="the task (release: one; confirm: one or more)")
    s.add_argument("--remote", default="origin", metavar="NAME", help="the git remote (default: origin)")
    s.add_argument("--force", action="store_true", help="release a live claim too (its worker's result is dropped)")
    s.add_argument("--json", action="store_true", help="[{task, worker, run, claimedAt, leaseUntil, leaseLeftS, "
                   "stale, ref, sha, note}] as JSON")

    s = cmd("mcp", "serve the task tools to an MCP client (Claude Code, Codex, Cursor, ...) on stdio", """\
  claude mcp add specflux -- specflux mcp
  specflux mcp --tools list_tasks,show_task""")
    s.add_argument("--tools", metavar="LIST", help="comma-separated tool names to offer (default: all)")

    s = cmd("board", "one self-contained HTML page: tasks by status, the dependency graph, runs; --serve: the control room", """\
  specflux board                        # writes .specflux/board.html
  specflux board --serve                # the control room: open the URL it prints (it carries the page's token)
  specflux board --serve --read-only    # watch only: no edits, no run control
  specflux board --serve --remote origin    # and the queue shared through the remote 'origin'""")
    s.add_argument("--out", metavar="FILE", help="where to write the page (default: .specflux/board.html)")
    s.add_argument("--serve", action="store_true", help="serve the page locally and refresh it when files change")
    s.add_argument("--port", type=int, default=0, metavar="N", help="the port for --serve (default: a free one)")
    s.add_argument("--host", default="127.0.0.1", metavar="HOST", help="the address for --serve (default: 127.0.0.1)")
    s.add_argument("--read-only", action="store_true", help="serve the page with no actions (no edits, no run control)")
    s.add_argument("--remote", metavar="NAME", help="also show the queue shared through this git remote (claims, workers, leases)")

    s = cmd("completion", "print a shell completion script", """\
  specflux completion bash > ~/.local/share/bash-completion/completions/specflux
  specflux completion zsh > ~/.zfunc/_specflux     # with fpath+=(~/.zfunc) before compinit in ~/.zshrc
  specflux completion fish > ~/.config/fish/completions/specflux.fish""")
    s.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell the script is for")

    s = cmd("demo", "a complete offline walk-through in a fresh folder")
    s.add_argument("dir", nargs="?", metavar="DIR", help="the folder to create (default: a new temporary folder)")

    if full:
        from specflux.cli.flow_parser import add_flow_parsers

        add_flow_parsers(sub)
    return p


def argv_needs_flow(argv) -> bool:
    """Whether the command line asks for a flow command (or for help)."""
    words = sys.argv[1:] if argv is None else list(argv)
    return not words or any(w in ("flow", "submit-review", "submit-tasks", "-h", "--help") for w in words)


def _version() -> str:
    from specflux import __version__

    return __version__
