"""The command line: a dispatcher over the library. `main.py` parses (`parser.py`) and runs a command;
each command's function is in the module of its group, and `output.py` prints what they share.

Here: which module holds each command, and `@command`, which registers a command's function. A
command's module is imported only when that command runs, so that `specflux show` does not pay for
the agent, import and flow commands. A new command: its arguments in `parser.py`, its function under
`@command("name")` in the module of its group, and its name in `GROUPS` here.
"""

from __future__ import annotations

from typing import Callable

GROUPS = {
    "task_commands": ("init", "new", "list", "show", "check", "uncheck", "set", "delete", "session", "complete", "handoff",
                      "wire", "archive", "lint", "ready", "graph", "log", "merge-driver"),
    "agent_commands": ("context", "run", "plan"),
    "import_commands": ("import",),
    "flow_commands": ("flow", "submit-review", "submit-tasks"),
    "claims_commands": ("claims",),
    "surface_commands": ("mcp", "board", "demo"),
    "completion": ("completion",),
    "usage_commands": ("stats",),
}
MODULES = {name: module for module, names in GROUPS.items() for name in names}  # command -> module

_FUNCTIONS: dict[str, Callable] = {}


def command(name: str):
    """Register the decorated function as command `name`: it takes the parsed arguments and
    returns the exit code."""
    def register(fn):
        _FUNCTIONS[name] = fn
        return fn

    return register


def find(name: str) -> Callable:
    """The function of command `name`, its group's module imported now (by `__import__`, which
    `python -X importtime` reports, as it does not report `importlib.import_module`)."""
    __import__(f"specflux.cli.{MODULES[name]}")
    return _FUNCTIONS[name]
