"""`specflux completion bash|zsh|fish`: scripts generated from the parser, run in the real shells.

bash is always there; zsh and fish are used when installed (skipped with the reason otherwise).
Each shell completes a command, a subcommand of `flow`, an option, an option's choices and the task
ids of the workspace (read from the task files' names by the shell, no specflux process).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from specflux.cli.completion import tree
from specflux.cli.main import main
from specflux.cli.parser import build_parser

from specflux.agent.presets import names as _agent_names

AGENT_NAMES = _agent_names()  # the backends, then the presets (presets.PRESETS)

ZCAP = Path(__file__).resolve().parents[1] / "fixtures" / "zsh_capture.zsh"


def generated(shell: str, capsys) -> str:
    assert main(["completion", shell]) == 0
    out, err = capsys.readouterr()
    assert out and not err
    return out


@pytest.fixture
def workspace(tmp_path, capsys) -> Path:
    """Tasks 1, 2 and T3, and a folder below the workspace to complete from."""
    root = tmp_path / "ws"
    root.mkdir()
    assert main(["init", str(root)]) == 0
    for title, task_id in (("One", "1"), ("Two", "2"), ("Slug", "T3")):
        assert main(["--root", str(root), "new", title, "--id", task_id]) == 0
    (root / "src").mkdir()
    capsys.readouterr()
    return root


@pytest.fixture
def scripts(tmp_path, capsys) -> dict[str, Path]:
    out = {}
    for shell in ("bash", "zsh", "fish"):
        path = tmp_path / f"specflux.{shell}"
        path.write_text(generated(shell, capsys))
        out[shell] = path
    return out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_names_every_command_and_option(shell, capsys):
    text = generated(shell, capsys)
    model = tree(build_parser(full=True))
    for command in model.walk():
        for part in command.path:
            assert part in text, f"{shell}: command {' '.join(command.path)}"
        for option in command.options:
            long = [n for n in option.names if n.startswith("--")]
            name = long[0][2:] if shell == "fish" else long[0]
            assert name in text, f"{shell}: {' '.join(command.path)} {long[0]}"
            for choice in option.choices:
                assert choice in text


def test_the_model_knows_what_completes_what():
    model = {" ".join(c.path): c for c in tree(build_parser(full=True)).walk()}
    options = {o.names[-1]: o for o in model["list"].options}
    assert options["--status"].kind == "choice" and "broken" in options["--status"].choices
    assert options["--json"].kind == "flag"
    assert model["show"].positional_kind() == "task"
    assert {o.names[-1]: o.kind for o in model["set"].options}["--add-dep"] == "task"
    assert {o.names[-1]: o.kind for o in model["new"].options}["--id"] == "text"  # a new id, not an existing one
    assert model["flow status"].positional_kind() == "run"
    assert {o.names[-1]: o.choices for o in model["flow start"].options}["--agent"] == AGENT_NAMES
    assert model["import"].positional_kind() == "file"
    assert [c.path[-1] for c in model["flow"].commands][:3] == ["start", "list", "status"]


# --------------------------------------------------------------------- bash

BASH_PROBE = r"""
source "$1"
complete -p specflux
shift
for line in "$@"; do
    read -r -a COMP_WORDS <<< "$line"
    [[ "$line" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _specflux
    printf '%s\n' "${COMPREPLY[*]}"
done
"""


def bash_complete(script: Path, cwd: Path, *lines: str) -> tuple[str, list[list[str]]]:
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", BASH_PROBE, "probe", str(script), *lines],
                          cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    registered, *answers = done.stdout.split("\n")[: len(lines) + 1]
    return registered, [sorted(a.split()) for a in answers]


def test_bash_script_registers_and_completes(scripts, workspace):
    registered, answers = bash_complete(
        scripts["bash"], workspace / "src",
        "specflux li", "specflux show ", "specflux list --status c", "specflux list --", "specflux flow ",
        "specflux flow start --agent c", "specflux set 2 --add-dep ", "specflux new --id ", "specflux completion ",
        "specflux session 1 --did x --n", "specflux show T")
    assert registered == "complete -F _specflux specflux"
    assert answers == [
        ["lint", "list"],
        ["1", "2", "T3"],
        ["complete"],
        ["--help", "--json", "--status"],
        ["approve", "list", "log", "pause", "reject", "replay", "resume", "start", "status", "stop"],
        sorted(n for n in AGENT_NAMES if n.startswith("c")),
        ["1", "2", "T3"],
        [],
        ["bash", "fish", "zsh"],
        ["--next", "--no-commit"],
        ["T3"],
    ]


def test_bash_task_ids_follow_root_and_env(scripts, workspace, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _, answers = bash_complete(scripts["bash"], elsewhere, f"specflux --root {workspace} show ", "specflux show ")
    assert answers == [["1", "2", "T3"], []]  # outside any workspace: nothing, and no error
    done = subprocess.run(["bash", "--norc", "-c", BASH_PROBE, "probe", str(scripts["bash"]), "specflux log "],
                          cwd=elsewhere, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "SPECFLUX_ROOT": str(workspace)})
    assert done.stdout.split("\n")[1].split() == ["1", "2", "T3"]


def test_bash_script_syntax():
    assert subprocess.run(["bash", "-n", "-c", build_script("bash")], timeout=60).returncode == 0


def build_script(shell: str) -> str:
    from specflux.cli.completion import script

    return script(shell, build_parser())


# --------------------------------------------------------------------- zsh


def need(shell: str) -> str:
    path = shutil.which(shell)
    if not path:
        pytest.skip(f"{shell} is not installed (apt-get install -y {shell})")
    return path


def test_zsh_script_syntax(scripts):
    zsh = need("zsh")
    done = subprocess.run([zsh, "-n", str(scripts["zsh"])], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_zsh_script_registers_with_compdef(scripts):
    zsh = need("zsh")
    done = subprocess.run([zsh, "-f", "-c", f"autoload -U compinit && compinit -u -D && source {scripts['zsh']} "
                                             "&& print -r -- $_comps[specflux]"],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "_specflux", done.stderr


@pytest.mark.parametrize("line, expected", [
    ("specflux li", ["lint", "list"]),
    ("specflux show ", ["1", "2", "T3"]),
    ("specflux list --status c", ["complete"]),
    ("specflux flow start --agent ", sorted(AGENT_NAMES)),
    ("specflux set 2 --add-dep ", ["1", "2", "T3"]),
])
def test_zsh_completes_in_an_interactive_shell(scripts, workspace, line, expected):
    """A real interactive zsh on a pseudo-terminal (zsh/zpty), TAB pressed after `line`."""
    assert zsh_complete(scripts["zsh"], workspace / "src", line) == expected


def test_zsh_capture_types_only_into_a_waiting_line_editor(scripts, workspace):
    """A shell slow to come back to its prompt (as on a loaded machine) still gets the whole line.

    Typed while a command still ran, `specflux li<TAB>` met the terminal's cooked mode, where the
    Ctrl-U that cleared the line afterwards erased it first: the capture saw no matches (CI, once).
    """
    assert zsh_complete(scripts["zsh"], workspace / "src", "specflux li", "precmd() { sleep 0.3 }") == ["lint", "list"]


def zsh_complete(script: Path, cwd: Path, line: str, *setup: str) -> list[str]:
    done = subprocess.run([need("zsh"), "-f", str(ZCAP), str(script), line, *setup], cwd=cwd,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return sorted(set(done.stdout.split()))


# --------------------------------------------------------------------- fish


def test_fish_script_syntax(scripts):
    fish = need("fish")
    done = subprocess.run([fish, "--no-config", "-n", str(scripts["fish"])], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_fish_completes(scripts, workspace):
    fish = need("fish")
    lines = ["specflux li", "specflux show ", "specflux list --status c", "specflux flow ", "specflux flow list --",
             "specflux set 2 --add-dep ", "specflux completion "]
    probe = f"source {scripts['fish']}\n" + "".join(
        f"echo (complete -C {line!r} | string replace -r '\\t.*' '')\n" for line in lines)
    done = subprocess.run([fish, "--no-config", "-c", probe], cwd=workspace / "src", capture_output=True,
                          text=True, timeout=60)
    assert not done.stderr, done.stderr
    answers = [sorted(a.split()) for a in done.stdout.split("\n")[: len(lines)]]
    assert answers == [
        ["lint", "list"],
        ["1", "2", "T3"],
        ["complete"],
        ["approve", "list", "log", "pause", "reject", "replay", "resume", "start", "status", "stop"],
        ["--help", "--json"],
        ["1", "2", "T3"],
        ["bash", "fish", "zsh"],
    ]
