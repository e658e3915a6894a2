"""Colour on a terminal, plain text everywhere else: the one decision, and the few ANSI codes used.

Colour is on when the stream is a terminal and `NO_COLOR` is unset or empty (https://no-color.org);
`FORCE_COLOR` or `CLICOLOR_FORCE` (any value but empty or `0`) turn it on into a pipe too, and
`TERM=dumb` turns it off. `NO_COLOR` wins over both. Standard library only, and little of it:
`specflux list` imports this module.

Colour is applied to text that is already safe (`escape.safe`): never to text from a task file as
it was read, so the only escape sequences reaching the terminal are the ones written here.
"""

from __future__ import annotations

import os
import re
import sys

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
DIM = "\x1b[2m"
RED = "\x1b[31m"
GREEN = "\x1b[32m"
YELLOW = "\x1b[33m"
BLUE = "\x1b[34m"
MAGENTA = "\x1b[35m"
CYAN = "\x1b[36m"

# Task statuses (format.metadata.STATUSES), `broken`, and the statuses of workflow runs (flow.state).
STATUS_COLOURS = {
    "pending": "",
    "in_progress": YELLOW,
    "review": CYAN,
    "complete": GREEN,
    "failed": RED,
    "blocked": MAGENTA,
    "broken": BOLD + RED,
    "BROKEN": BOLD + RED,
    "created": "",
    "running": YELLOW,
    "paused": CYAN,
    "completed": GREEN,
    "user_exit": MAGENTA,
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FULL, _EMPTY = "\u2588", "\u2591"  # █ ░


def _set(name: str) -> bool:
    value = os.environ.get(name, "")
    return value != "" and value != "0"


def colour(stream=None) -> bool:
    """Whether to write colour to `stream` (default: standard output)."""
    if os.environ.get("NO_COLOR"):
        return False
    if _set("FORCE_COLOR") or _set("CLICOLOR_FORCE"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def paint(text: str, code: str) -> str:
    """`text` in `code`'s style (no codes at all when `code` is empty)."""
    return f"{code}{text}{RESET}" if code and text else text


def status(text: str) -> str:
    """A status word in its colour."""
    return paint(text, STATUS_COLOURS.get(text, ""))


def visible(text: str) -> str:
    """`text` without the colour codes of this module."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def width(text: str) -> int:
    """How many columns `text` takes, colour codes not counted."""
    return len(visible(text)) if "\x1b" in text else len(text)


def bars_fit(stream=None) -> bool:
    """Whether `stream`'s encoding can write the progress bar's blocks."""
    encoding = getattr(sys.stdout if stream is None else stream, "encoding", None) or "ascii"
    try:
        (_FULL + _EMPTY).encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return False
    return True


def bar(done: int, total: int, cells: int = 5) -> str:
    """`███░░ 3/5`: the done part green, the rest dim; blank cells when there is nothing to do."""
    if total <= 0:
        return " " * cells + f" {done}/{total}"
    full = min(cells, max(0, round(cells * done / total)))
    if done and not full:
        full = 1  # something done shows
    elif done < total and full == cells:
        full = cells - 1  # not all done never looks all done
    return paint(_FULL * full, GREEN) + paint(_EMPTY * (cells - full), DIM) + f" {done}/{total}"
