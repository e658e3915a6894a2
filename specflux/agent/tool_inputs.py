"""What each tool of a session accepts (pydantic models): the judge of every input that does not
fit as it is (plain_inputs.py takes those that do), and the words of every refusal.

Apart from `tools.py` so that a session whose agent makes only such calls (or calls no tool: an
agent CLI) never imports pydantic: building its models is ~70 ms of CPU, paid before the first
agent of every `flow start` and of every worker otherwise. `Toolbox.call` imports this module.
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


# each tool's input model (submit_review and submit_tasks check their raw input: handin.py)
MODELS: dict[str, type[BaseModel]] = {
    "read_file": PathIn, "list_files": ListIn, "search": SearchIn, "write_file": WriteIn,
    "edit_file": EditIn, "run_command": RunIn, "check_criterion": IndexIn, "end_session": Handoff,
}
