"""Every argument of every command says what it is for, and `--help` of each command works.

The whole parser tree (`build_parser(full=True)`, the flow commands and the hand-ins included) is
walked, so a command or option added later without help fails here with its name.
"""

from __future__ import annotations

import argparse

import pytest

from specflux.cli import build_parser, main

# Commands whose use is not obvious from their options: their --help ends with examples.
WITH_EXAMPLES = ["new", "session", "complete", "set", "run", "plan", "import", "completion", "flow start"]


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for `parser` and every parser below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, (*path, name))


def commands() -> list[tuple[str, ...]]:
    return [path for path, _ in walk(build_parser(full=True))]


def parser_for(path: tuple[str, ...]) -> argparse.ArgumentParser:
    return dict(walk(build_parser(full=True)))[path]


def test_the_tree_is_the_whole_command_line():
    names = {" ".join(p) for p in commands()}
    assert {"list", "ready", "graph", "completion", "mcp", "board", "submit-review", "submit-tasks",
            "flow", "flow start", "flow status", "flow replay"} <= names


def test_every_argument_of_every_command_has_help():
    missing = []
    for path, parser in walk(build_parser(full=True)):
        where = "specflux " + " ".join(path) if path else "specflux"
        for action in parser._actions:
            name = "/".join(action.option_strings) or action.metavar or action.dest
            if not action.help or action.help == argparse.SUPPRESS or not str(action.help).strip():
                missing.append(f"{where}: {name}")
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [f"{where} {sub}: the command itself" for sub in action.choices if sub not in helped]
    assert not missing, "arguments without help:\n" + "\n".join(missing)


@pytest.mark.parametrize("command", WITH_EXAMPLES)
def test_commands_that_are_not_obvious_show_examples(command):
    parser = parser_for(tuple(command.split()))
    assert parser.epilog and parser.epilog.startswith("examples:\n"), command
    examples = [line.strip() for line in parser.epilog.splitlines()[1:] if line.strip().startswith("specflux")]
    assert examples and all(line.startswith(f"specflux {command}") for line in examples), parser.epilog
    assert "examples:\n  specflux" in parser.format_help()  # kept as written (RawDescriptionHelpFormatter)


@pytest.mark.parametrize("path", commands(), ids=lambda p: " ".join(p) or "specflux")
def test_every_help_page_prints(path, capsys):
    """`specflux ... --help` exits 0 with a usage line (a stray `%` in a help string would raise)."""
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: specflux")


def test_help_for_one_command_builds_only_it_and_still_has_its_help(capsys):
    """`main` builds only the named command's parser: its help is the same as in the full tree."""
    assert main(["session", "--help"]) == 0
    alone = capsys.readouterr().out
    assert alone == parser_for(("session",)).format_help()
