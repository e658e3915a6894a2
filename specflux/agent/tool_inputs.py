"""What each tool of a session accepts (pydantic models), checked when the model calls it.

Apart from `tools.py` so that a session whose agent calls no tool (an agent CLI, a replay of one)
never imports pydantic: building its models is ~0.1 s of CPU, paid before the first agent of
every `flow start` and of every worker otherwise. `Toolbox.call` imports this module.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specflux.agent.handoff import Handoff

__all__ = ["MODELS", "ValidationError"]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PathIn(_In):
    path: str


class ListIn(_In):
    path: str = "."


class SearchIn(ListIn):
    pattern: str


class WriteIn(PathIn):
    content: str


class EditIn(PathIn):
    old: str = Field(min_length=1)
    new: str


class RunIn(_In):
    command: str = Field(min_length=1)
    timeout_s: float | None = Field(default=None, gt=0)


class IndexIn(_In):
    index: int


# each tool's input model; None where the tool checks its raw input itself (handin.py)
MODELS: dict[str, type[BaseModel] | None] = {
    "read_file": PathIn, "list_files": ListIn, "search": SearchIn, "write_file": WriteIn,
    "edit_file": EditIn, "run_command": RunIn, "check_criterion": IndexIn, "end_session": Handoff,
    "submit_review": None, "submit_tasks": None,
}
