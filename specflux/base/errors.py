"""One error family. Every error a user can cause carries the place it is about."""

from __future__ import annotations

from pathlib import Path


class SpecfluxError(Exception):
    """A problem with the user's data or environment, printed as `path:line: message`.

    `exit_code` follows one rule (docs/first-hour.md): 1 the data or a run said no, 2 a usage
    mistake (an unknown command or option, a bad value, arguments that do not go together).
    """

    exit_code = 1

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line

    def located(self, path: str | Path | None = None) -> "SpecfluxError":
        """Return this error with `path` filled in where it had none."""
        if self.path is None and path is not None:
            self.path = str(path)
        return self

    def __str__(self) -> str:
        if self.path and self.line:
            return f"{self.path}:{self.line}: {self.message}"
        if self.path:
            return f"{self.path}: {self.message}"
        return self.message


class ParseError(SpecfluxError):
    """A task-state file that cannot be read as one."""


class UsageError(SpecfluxError):
    """The command was asked for something that does not make sense."""

    exit_code = 2


class Refused(SpecfluxError):
    """The command makes sense, but the data or a run says no (a task complete already, a dependency
    not done, a task held by another run): exit 1, with what to do instead."""


class NotFoundError(SpecfluxError):
    """A task, workspace or file that does not exist."""


class GitError(SpecfluxError):
    """git refused to do what was asked."""


class IdentityError(GitError):
    """git has no author identity configured."""


class AgentError(SpecfluxError):
    """An agent session could not run or went wrong."""
