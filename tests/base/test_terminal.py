"""Colour on a terminal, plain text into a pipe: the decision (`specflux.base.terminal`), the coloured
tables (`views`), and `specflux list` run for real on a pseudo-terminal and into a pipe."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from specflux.base import terminal
from specflux.cli.main import main
from specflux.store.values import TaskSummary
from specflux.surface.views import list_table, table

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
COLOUR_VARS = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "TERM")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def plain_env(monkeypatch):
    for name in COLOUR_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# --------------------------------------------------------------------- the decision


def test_colour_on_a_terminal_only(plain_env):
    assert terminal.colour(Tty()) is True
    assert terminal.colour(io.StringIO()) is False
    assert terminal.colour(object()) is False  # no isatty at all


@pytest.mark.parametrize("value, expected", [("1", False), ("0", False), ("yes", False), ("", True)])
def test_no_color_any_non_empty_value_turns_it_off(plain_env, value, expected):
    plain_env.setenv("NO_COLOR", value)
    assert terminal.colour(Tty()) is expected


@pytest.mark.parametrize("name", ["FORCE_COLOR", "CLICOLOR_FORCE"])
def test_force_color_into_a_pipe_but_not_over_no_color(plain_env, name):
    plain_env.setenv(name, "1")
    assert terminal.colour(io.StringIO()) is True
    plain_env.setenv(name, "0")
    assert terminal.colour(io.StringIO()) is False
    plain_env.setenv(name, "1")
    plain_env.setenv("NO_COLOR", "1")
    assert terminal.colour(Tty()) is False


def test_dumb_terminal_gets_no_colour(plain_env):
    plain_env.setenv("TERM", "dumb")
    assert terminal.colour(Tty()) is False


def test_a_closed_stream_is_not_a_terminal(plain_env):
    stream = io.StringIO()
    stream.close()
    assert terminal.colour(stream) is False


def test_progress_bar():
    assert ANSI.sub("", terminal.bar(3, 5)) == "███░░ 3/5"
    assert ANSI.sub("", terminal.bar(5, 5)) == "█████ 5/5"
    assert ANSI.sub("", terminal.bar(0, 4)) == "░░░░░ 0/4"
    assert ANSI.sub("", terminal.bar(1, 100)) == "█░░░░ 1/100"  # something done shows
    assert ANSI.sub("", terminal.bar(99, 100)) == "████░ 99/100"  # not all done never looks done
    assert terminal.bar(0, 0) == "      0/0"
    assert terminal.width(terminal.bar(3, 5)) == len("███░░ 3/5")


# --------------------------------------------------------------------- tables


def rows() -> list[TaskSummary]:
    return [
        TaskSummary("1", ".specflux/task-states/task-1-state.md", 900, "Schema", "complete", 2, 2, 1),
        TaskSummary("2", ".specflux/task-states/task-2-state.md", 2000, "Evil \x1b]52;c;AAAA\x07 title\u202e",
                    "in_progress", 1, 5, 2, ["1"]),
        TaskSummary("10", ".specflux/task-states/task-10-state.md", 100, "Pending", "pending", 0, 0, 0),
    ]


def test_plain_table_has_no_escape_sequences_and_escapes_task_text():
    text = list_table(rows(), colour=False)
    assert "\x1b" not in text and "\u202e" not in text
    assert "Evil \\x1b]52;c;AAAA\\x07 title\\u202e" in text
    assert text.splitlines()[0] == "ID  STATUS       DONE  SESSIONS  SIZE    DEPS  TITLE"


def test_coloured_table_aligns_on_what_the_terminal_shows():
    text = list_table(rows(), colour=True)
    shown = [ANSI.sub("", line) for line in text.splitlines()]
    assert shown[0].split() == ["ID", "STATUS", "DONE", "SESSIONS", "SIZE", "DEPS", "TITLE"]
    starts = {line.index("Schema" if "Schema" in line else "Evil" if "Evil" in line else "Pending") for line in shown[1:]}
    assert len(starts) == 1, shown  # the titles line up, colour codes not counted
    assert shown[1].split()[:4] == ["1", "complete", "█████", "2/2"]
    assert "███░░" not in shown[2] and "█░░░░ 1/5" in shown[2]
    assert "\x1b[32mcomplete\x1b[0m" in text and "\x1b[33min_progress\x1b[0m" in text


def test_colour_never_reaches_the_terminal_from_task_text():
    """Only the codes terminal.py writes: the title's own ESC and bidi override stay escaped."""
    text = list_table(rows(), colour=True)
    assert "\u202e" not in text and "\x07" not in text
    assert "Evil \\x1b]52;c;AAAA\\x07 title\\u202e" in text
    assert set(re.findall(r"\x1b[^m]*m", text)) <= {"\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[32m",
                                                     "\x1b[33m", "\x1b[34m", "\x1b[35m", "\x1b[36m", "\x1b[1;31m",
                                                     "\x1b[1m\x1b[31m"}


def test_broken_rows_in_colour():
    broken = TaskSummary("9", ".specflux/task-states/task-9-state.md", 10, error=_error())
    text = list_table([broken], colour=True)
    assert "BROKEN" in text and "\x1b[31m" in text


def _error():
    from specflux.base.errors import ParseError

    return ParseError("no metadata block", ".specflux/task-states/task-9-state.md", 1)


def test_generic_table_colours_the_status_column_only_on_request():
    cells = [["1", "complete", "x"], ["22", "failed", "y"]]
    assert table(["ID", "STATUS", "TITLE"], cells, colour=False) == "ID  STATUS    TITLE\n1   complete  x\n22  failed    y"
    painted = table(["ID", "STATUS", "TITLE"], cells, status_column=1, colour=True)
    assert [ANSI.sub("", line) for line in painted.splitlines()] == ["ID  STATUS    TITLE", "1   complete  x", "22  failed    y"]
    assert "\x1b[31mfailed\x1b[0m" in painted


# --------------------------------------------------------------------- the real thing


@pytest.fixture
def workspace(tmp_path, capsys) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    assert main(["init", str(root)]) == 0
    assert main(["--root", str(root), "new", "Schema", "--ac", "a", "--ac", "b", "--ac", "c"]) == 0
    assert main(["--root", str(root), "check", "1", "1"]) == 0
    assert main(["--root", str(root), "set", "1", "--status", "in_progress"]) == 0
    assert main(["--root", str(root), "new", "Service", "--dep", "1"]) == 0
    capsys.readouterr()
    return root


def env_for(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in COLOUR_VARS}
    env.update({"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "PYTHONIOENCODING": "utf-8", **extra})
    return env


def on_a_pty(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `specflux ARGV` with its standard output and error on a new pseudo-terminal."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", "from specflux.cli.main import run; run()", *argv],
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            proc.kill()
            raise AssertionError("specflux printed nothing for 30 s on the pty")
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def in_a_pipe(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", "from specflux.cli.main import run; run()", *argv], env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=60)
    return done.returncode, done.stdout


@pytest.mark.parametrize("command", [["list"], ["ready"]])
def test_colour_on_a_pseudo_terminal(workspace, command):
    code, out = on_a_pty(["--root", str(workspace), *command], env_for())
    assert code == 0
    assert ANSI.search(out), out
    assert "\x1b[1mID\x1b[0m" in out and "\x1b[33min_progress\x1b[0m" in out
    if command == ["list"]:
        assert "██░░░ 1/3" in ANSI.sub("", out)


def test_no_colour_into_a_pipe_and_the_same_text_as_before(workspace):
    code, out = in_a_pipe(["--root", str(workspace), "list"], env_for())
    assert code == 0 and "\x1b" not in out
    assert out.splitlines()[1].split()[:4] == ["1", "in_progress", "1/3", "0"]
    code, shown = on_a_pty(["--root", str(workspace), "list"], env_for())
    assert [line.rstrip() for line in ANSI.sub("", shown).splitlines()][0].split() == out.splitlines()[0].split()


def test_no_color_on_a_pseudo_terminal(workspace):
    code, out = on_a_pty(["--root", str(workspace), "list"], env_for(NO_COLOR="1"))
    assert code == 0 and "\x1b" not in out and "1/3" in out and "█" not in out


def test_force_color_into_a_pipe(workspace):
    code, out = in_a_pipe(["--root", str(workspace), "list"], env_for(FORCE_COLOR="1"))
    assert code == 0 and "\x1b[" in out
    code, out = in_a_pipe(["--root", str(workspace), "list"], env_for(FORCE_COLOR="1", NO_COLOR="1"))
    assert "\x1b" not in out


def test_json_is_never_coloured(workspace):
    code, out = on_a_pty(["--root", str(workspace), "list", "--json"], env_for())
    assert code == 0 and "\x1b" not in out


def test_coloured_columns_line_up_with_warnings_broken_rows_and_no_criteria():
    """The visible widths list_table computes for coloured cells are the widths a terminal shows."""
    table_rows = [*rows(), TaskSummary("9", ".specflux/task-states/task-9-state.md", 10, error=_error()),
                  TaskSummary("100", "p", 80_000, "Big", "review", 3, 7, 12, ["1", "2"], warnings=["over 75 KB"])]
    text = list_table(table_rows, colour=True)
    shown = [ANSI.sub("", line) for line in text.split("\n\n")[0].splitlines()]
    titles = ["TITLE", "Schema", "Evil", "Pending", ".specflux/task-states/task-9-state.md:1", "Big"]
    assert len({line.index(title) for line, title in zip(shown, titles)}) == 1, "\n".join(shown)
    assert "78.1 KB !" in shown[5]
    assert ANSI.sub("", text.split("\n\n")[1]) == "! 100: over 75 KB"


def test_tables_without_a_status_column_stay_plain_on_a_terminal(plain_env, monkeypatch):
    """log, plan and import escape their whole table: it must hold no colour codes to escape."""
    monkeypatch.setattr(sys, "stdout", Tty())
    assert table(["COMMIT", "SUBJECT"], [["abc", "x"]]) == "COMMIT  SUBJECT\nabc     x"
    assert "\x1b[" in table(["ID", "STATUS"], [["1", "complete"]], status_column=1)
