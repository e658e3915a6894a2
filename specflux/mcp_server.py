"""`specflux mcp`: the task tools served to an MCP client on stdio (CONTRACT section 7).

Each tool makes the library calls its CLI command makes and returns the same `--json` shape
(`views.py`); writes answer with `views.outcome_json`. A `SpecfluxError` becomes an error result
reading `path:line: message`, as the CLI prints it; the server goes on serving. The `mcp` package
(the `specflux[mcp]` extra) is imported only when the server starts.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from typing import Annotated, Any, Callable, Literal, Sequence

from pydantic import Field

from specflux.base.errors import SpecfluxError, UsageError

Id = Annotated[str, Field(description="task id, e.g. 102 or T001", coerce_numbers_to_str=True)]  # 102 as a number too
Ids = list[Annotated[str, Field(coerce_numbers_to_str=True)]]
Status = Literal["pending", "in_progress", "review", "complete", "failed", "blocked"]  # as format.metadata.STATUSES
Commit = Annotated[bool, Field(description="false: write the file, do not commit")]


class Tools:
    """The tools, bound to the `--root` they serve (None: the workspace around the current folder,
    found again on every call, so that `specflux init` after the server started is seen)."""

    def __init__(self, root: str | None):
        self.root = root

    def _manager(self, commit: bool = True):
        from specflux.surface.tasks import open_manager

        return open_manager(self.root, commit=commit)

    # ----------------------------------------------------------------- reading

    def list_tasks(self, status: Annotated[Literal[Status, "broken"] | None, Field(
            description="only tasks with this status; broken: unreadable files")] = None):
        """Every task: id, title, status, criteria done/total, sessions, size, dependencies. A file
        that cannot be read has status broken and its error as path:line: message."""
        from specflux.surface.views import summary_json

        return [summary_json(r) for r in self._manager(commit=False).summaries(status)]

    def show_task(self, id: Id):
        """One task in full: metadata, requirements, acceptance criteria (1-based index), chain
        inputs, progress-log sessions, chain output."""
        from specflux.surface.views import task_json

        manager = self._manager(commit=False)
        doc = manager.load(id)
        return task_json(doc.to_state(id), manager.ws.relative(manager.path(id)), len(doc.text.encode("utf-8")))

    def ready_tasks(self):
        """Tasks not complete whose dependencies are all complete, in dependency order."""
        from specflux.store.chain import Graph
        from specflux.surface.views import ready_json

        graph = Graph.load(self._manager(commit=False))
        return ready_json(graph), graph.problems()

    def task_context(self, id: Id):
        """The exact context an agent session on the task receives (system prompt, task context,
        files it may read), with a token estimate."""
        from specflux.agent.context import build_context
        from specflux.surface.views import context_json

        return context_json(build_context(self._manager(commit=False), id))

    def flow_status(self, run: Annotated[str | None, Field(
            description="run id or a unique prefix (default: the latest run)")] = None):
        """A workflow run's state: status, tasks, current task, attempts, outputs, metrics."""
        from specflux.flow.record.run import Run

        return Run.find(self._manager(commit=False).ws, run).public_state()

    # ----------------------------------------------------------------- writing

    def check_criteria(self, id: Id,
                       indices: Annotated[list[int], Field(description="1-based criterion numbers", min_length=1)],
                       checked: Annotated[bool, Field(description="false: untick them")] = True):
        """Tick (or untick) acceptance criteria. Does not commit; log_session does."""
        from specflux.surface.views import outcome_json

        manager = self._manager(commit=False)
        return outcome_json(manager.set_checked(id, indices, checked), manager.ws)

    def log_session(self, id: Id,
                    did: Annotated[list[str], Field(description="what was done, one bullet each", min_length=1)],
                    issues: Annotated[str, Field(description="problems met")] = "",
                    next: Annotated[str, Field(description="what the next session should do")] = "",
                    check: Annotated[list[int], Field(description="criteria to tick too (1-based)")] = [],
                    commit: Commit = True):
        """Append a progress-log session (a pending task becomes in_progress) and commit it with
        the task's trailers."""
        from specflux.format.model import SessionInput
        from specflux.surface.views import outcome_json

        manager = self._manager()
        outcome = manager.append_session(id, SessionInput(did=did, issues=issues, next=next), checks=check,
                                         commit=commit)
        return outcome_json(outcome, manager.ws)

    def complete_task(self, id: Id,
                      summary: Annotated[str, Field(description="what the task delivered (the chain output's summary)")],
                      downstream: Annotated[str | None, Field(
                          description="API contracts and integration notes for dependent tasks")] = None,
                      commit: Commit = True):
        """Write the chain output, set status complete, wire it into dependent tasks, commit.
        Refused for the task a workflow run is driving."""
        from specflux.surface.tasks import refuse_complete_inside_run
        from specflux.surface.views import outcome_json

        refuse_complete_inside_run(id)
        manager = self._manager()
        return outcome_json(manager.complete(id, summary, downstream, commit=commit), manager.ws)

    def set_task(self, id: Id,
                 status: Annotated[Status | None, Field(description="new status")] = None,
                 title: Annotated[str | None, Field(description="new title")] = None,
                 priority: Annotated[int | None, Field(description="1 (highest) to 5")] = None,
                 add_deps: Annotated[Ids, Field(description="task ids to depend on")] = [],
                 remove_deps: Annotated[Ids, Field(description="dependencies to drop")] = []):
        """Change a task's fields; a dependency that is unknown or closes a cycle is refused."""
        from specflux.surface.views import outcome_json

        if status is None and title is None and priority is None and not add_deps and not remove_deps:
            raise UsageError("nothing to set: give status, title, priority, add_deps or remove_deps")
        manager = self._manager()
        outcome = manager.update(id, status=status, title=title, priority=priority, add_deps=add_deps,
                                 remove_deps=remove_deps)
        return outcome_json(outcome, manager.ws)


NAMES = ("list_tasks", "show_task", "ready_tasks", "task_context", "check_criteria", "log_session",
         "complete_task", "set_task", "flow_status")
READ_ONLY = {"list_tasks", "show_task", "ready_tasks", "task_context", "flow_status"}


def chosen(tools: str | None) -> list[str]:
    """The tool names `--tools` asks for, in their usual order; an unknown one is a usage mistake."""
    if tools is None:
        return list(NAMES)
    asked = [t.strip() for t in tools.split(",") if t.strip()]
    unknown = [t for t in asked if t not in NAMES]
    valid = f"(valid: {', '.join(NAMES)})"
    if unknown:
        raise UsageError(f"unknown tool{'s' if len(unknown) > 1 else ''} for --tools: {', '.join(unknown)} {valid}")
    if not asked:
        raise UsageError(f"--tools names no tool {valid}")
    return [t for t in NAMES if t in asked]


def _answer(data: Any, problems: Sequence[str] = ()):
    """The result: the JSON as one text block; problems the CLI prints on stderr in a second one."""
    from mcp.types import CallToolResult, TextContent

    from specflux.base.escape import safe_json

    content = [TextContent(type="text", text=safe_json(json.dumps(data, ensure_ascii=False)))]
    if problems:
        content.append(TextContent(type="text", text="\n".join(problems)))
    return CallToolResult(content=content)


def _tool(method: Callable, serial: threading.Lock) -> Callable:
    """`method` as the SDK calls it: one call at a time (the SDK runs each on a worker thread, and
    git takes one commit at a time), a SpecfluxError or OSError as an error result in the CLI's words."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(method)
    def call(**kwargs):
        try:
            with serial:
                result = method(**kwargs)
        except SpecfluxError as e:
            raise ToolError(str(e)) from None
        except OSError as e:  # what the file system refused where no file-level check caught it first
            raise ToolError(f"{e.filename}: {e.strerror or e}" if e.filename else str(e.strerror or e)) from None
        except RecursionError:
            raise ToolError("a file nests too deeply to read") from None
        return _answer(*result) if isinstance(result, tuple) else _answer(result)

    return call


def _schema(node: Any) -> Any:
    """A JSON schema without pydantic's generated titles and null defaults (tokens that say nothing)."""
    if isinstance(node, dict):
        out = {k: _schema(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
        if out.get("default", 0) is None:
            del out["default"]
        return out
    if isinstance(node, list):
        return [_schema(v) for v in node]
    return node


def build_server(names: list[str], root: str | None = None):
    """The MCPServer offering `names`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool
    from mcp.types import ToolAnnotations

    from specflux import __version__

    tools, serial = Tools(root), threading.Lock()
    registered = []
    for name in names:
        method = getattr(tools, name)
        tool = Tool.from_function(_tool(method, serial), name=name, description=" ".join(method.__doc__.split()),
                                  annotations=ToolAnnotations(read_only_hint=True) if name in READ_ONLY else None,
                                  structured_output=False)
        registered.append(tool.model_copy(update={"parameters": _schema(tool.parameters)}))
    return MCPServer("specflux", version=__version__, tools=registered, log_level="WARNING",
                     instructions="Task state of this repository (.specflux/task-states/, one markdown file per "
                                  "task). Results are specflux's --json shapes; errors read path:line: message.")


def serve(args) -> int:
    names = chosen(getattr(args, "tools", None))
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        print("specflux: the MCP server needs the mcp package: pip install 'specflux[mcp]'", file=sys.stderr)
        return 2
    build_server(names, args.root).run("stdio")
    return 0
