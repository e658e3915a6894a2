"""Shell completion scripts for bash, zsh and fish, generated from the argparse tree.

The commands, the `flow` subcommands, each command's options and their choices (`--status`,
`--agent`, `--format`, ...) come from `parser.build_parser()`, so a new option is completed without
touching this module. Task ids and run ids are completed by the shell itself, from the names of
`.specflux/task-states/task-<id>-state.md` and `.specflux/runs/<run>/events.jsonl` in the workspace
(`--root` on the command line, else `SPECFLUX_ROOT`, else the nearest `.specflux/` upwards): no
Python process per key press.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from specflux.cli import command

TASK_DESTS = {"id", "ids"}  # positionals that name a task (`new --id` names a new one)
TASK_OPTIONS = {"dep", "add_dep", "remove_dep"}  # options that name a task
RUN_DESTS = {"run"}
FILE_DESTS = {"path", "paths", "prd", "recording", "out", "base", "ours", "theirs", "workflow"}
DIR_DESTS = {"dir", "root", "into"}


@dataclass
class Arg:
    """One option or positional, as a completer needs it."""

    names: list[str]  # option strings; empty for a positional
    dest: str
    help: str
    kind: str  # "flag", "choice", "task", "run", "file", "dir", "text"
    choices: list[str] = field(default_factory=list)
    repeat: bool = False  # an option given more than once, or a positional taking several
    optional: bool = False  # a positional that may be left out


@dataclass
class Command:
    path: tuple[str, ...]
    help: str
    options: list[Arg] = field(default_factory=list)
    positionals: list[Arg] = field(default_factory=list)
    commands: list["Command"] = field(default_factory=list)

    def walk(self):
        yield self
        for c in self.commands:
            yield from c.walk()

    def positional_kind(self) -> str:
        """What the command's positionals are completed with (the first that completes to anything)."""
        return next((p.kind for p in self.positionals if p.kind != "text"), "text")


def _kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if action.choices:
        return "choice"
    if action.dest in (TASK_OPTIONS if action.option_strings else TASK_DESTS):
        return "task"
    if action.dest in RUN_DESTS:
        return "run"
    if action.dest in DIR_DESTS:
        return "dir"
    if action.dest in FILE_DESTS or (action.dest == "json" and action.metavar == "FILE|-"):
        return "file"
    return "text"


def _short(text: str | None) -> str:
    """A help text cut to what fits beside a completion: its first clause, without a long aside."""
    text = " ".join((text or "").replace("%%", "%").split())
    if "; " in text[12:]:
        text = text[: text.index("; ", 12)]
    if len(text) > 60 and " (" in text[12:] and "(" not in text[: text.index(" (", 12)]:
        text = text[: text.index(" (", 12)]
    return text if len(text) <= 72 else text[:71].rstrip() + "\u2026"


def tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), help: str = "") -> Command:
    """The completion model of `parser` and everything below it."""
    node = Command(path, _short(help or parser.description))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            node.commands += [tree(p, (*path, name), helps.get(name) or "") for name, p in action.choices.items()]
            continue
        if action.help == argparse.SUPPRESS:
            continue
        arg = Arg(list(action.option_strings), action.dest, _short(action.help), _kind(action),
                  [str(c) for c in action.choices or ()],
                  isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+"), action.nargs == "?")
        (node.options if action.option_strings else node.positionals).append(arg)
    return node


def _always_valued(root: Command) -> list[str]:
    """Options that take a value under every command that has them: the word after one is its
    value, not a command (`--json` is a flag but for the hand-ins, so it is not one of them)."""
    valued = {n for c in root.walk() for o in c.options if o.kind != "flag" for n in o.names}
    flags = {n for c in root.walk() for o in c.options if o.kind == "flag" for n in o.names}
    return sorted(valued - flags)


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` (bash, zsh or fish)."""
    root = tree(parser)
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](root, parser.prog)


@command("completion")
def cmd_completion(args) -> int:
    from specflux.cli.parser import build_parser

    print(script(args.shell, build_parser()), end="")
    return 0


# --------------------------------------------------------------------- bash


def _sq(text: str) -> str:
    """`text` as one single-quoted shell word (bash, zsh)."""
    return "'" + text.replace("'", "'\\''") + "'"


_BASH_KIND = {
    "task": 'COMPREPLY=($(compgen -W "$(_specflux_tasks)" -- "$cur"))',
    "run": 'COMPREPLY=($(compgen -W "$(_specflux_runs)" -- "$cur"))',
    "file": "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\"))",
    "dir": "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\"))",
    "text": "COMPREPLY=()",
}

_BASH_HELPERS = r'''
_specflux_dir() {
    # the .specflux folder: --root on the command line, else $SPECFLUX_ROOT, else the nearest upwards
    local dir="${SPECFLUX_ROOT:-}" i
    for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
        case "${COMP_WORDS[i]}" in
            --root) dir="${COMP_WORDS[i+1]:-}" ;;
            --root=*) dir="${COMP_WORDS[i]#--root=}" ;;
        esac
    done
    if [[ -z "$dir" ]]; then
        dir="$PWD"
        while [[ -n "$dir" && ! -d "$dir/.specflux" ]]; do
            dir="${dir%/*}"
        done
    fi
    dir="${dir/#\~/$HOME}"
    printf '%s\n' "${dir:-.}/.specflux"
}

_specflux_tasks() {
    local f
    for f in "$(_specflux_dir)"/task-states/task-*-state.md; do
        [[ -e "$f" ]] || continue
        f="${f##*/task-}"
        printf '%s\n' "${f%-state.md}"
    done
}

_specflux_runs() {
    local f
    for f in "$(_specflux_dir)"/runs/*/events.jsonl; do
        [[ -e "$f" ]] || continue
        f="${f%/events.jsonl}"
        printf '%s\n' "${f##*/}"
    done
}
'''


def bash(root: Command, prog: str) -> str:
    value_cases, option_cases, positional_cases = [], [], []
    for c in root.walk():
        key = " ".join(c.path)
        options = [n for o in c.options for n in o.names]
        option_cases.append(f"        {_sq(key)}) words={_sq(' '.join(options))} ;;")
        for o in c.options:
            if o.kind == "flag":
                continue
            pattern = "|".join(_sq(f"{key}|{n}") for n in o.names)
            action = (f"COMPREPLY=($(compgen -W {_sq(' '.join(o.choices))} -- \"$cur\"))" if o.kind == "choice"
                      else _BASH_KIND[o.kind])
            value_cases.append(f"        {pattern}) {action}; return ;;")
        if c.commands:
            names = " ".join(s.path[-1] for s in c.commands)
            positional_cases.append(f"        {_sq(key)}) COMPREPLY=($(compgen -W {_sq(names)} -- \"$cur\")); return ;;")
        elif c.positionals and c.positional_kind() != "text":
            kind = c.positionals[0]
            action = (f"COMPREPLY=($(compgen -W {_sq(' '.join(kind.choices))} -- \"$cur\"))"
                      if c.positional_kind() == "choice" else _BASH_KIND[c.positional_kind()])
            positional_cases.append(f"        {_sq(key)}) {action}; return ;;")
    groups = sorted({" ".join(c.path) for c in root.walk() if c.commands and c.path})
    grouped = " ".join(groups)
    takes_value = "|".join(_always_valued(root))
    return f"""# {prog} completion for bash, generated by `{prog} completion bash` from its argument parser.
# Install: {prog} completion bash > ~/.local/share/bash-completion/completions/{prog}
#      or: source <({prog} completion bash)   (in ~/.bashrc)
{_BASH_HELPERS}
_specflux() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local key="" word i words
    # the command (and subcommand) typed so far: the words before the cursor that are not options
    # or option values
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "$word" in
            {takes_value}) ((i++)) ;;
            -*) ;;
            *)
                if [[ -z "$key" ]]; then
                    key="$word"
                elif [[ " {grouped} " == *" $key "* ]]; then
                    key="$key $word"
                else
                    break
                fi
                ;;
        esac
    done
    case "$key|$prev" in
{chr(10).join(value_cases)}
    esac
    if [[ "$cur" != -* ]]; then
        case "$key" in
{chr(10).join(positional_cases)}
        esac
    fi
    case "$key" in
{chr(10).join(option_cases)}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}

complete -F _specflux {prog}
"""


# --------------------------------------------------------------------- zsh


def _zdesc(text: str) -> str:
    """Help text inside a zsh `_arguments` spec's [...] (the spec is then single-quoted)."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


_ZSH_KIND = {"task": "_specflux_tasks", "run": "_specflux_runs", "file": "_files", "dir": "_files -/", "text": " "}


def _zsh_action(a: Arg) -> str:
    if a.kind == "choice":
        return "(" + " ".join(a.choices) + ")"
    return _ZSH_KIND[a.kind]


def _zsh_specs(c: Command) -> list[str]:
    specs = []
    for o in c.options:
        desc = _zdesc(o.help)
        value = "" if o.kind == "flag" else f":{o.dest.replace('_', ' ')}:{_zsh_action(o)}"
        star = "*" if o.repeat else ""
        if len(o.names) > 1:
            exclusive = "(" + " ".join(o.names) + ")"
            specs += [_sq(f"{star or exclusive}{n}[{desc}]{value}") for n in o.names]
        else:
            specs.append(_sq(f"{star}{o.names[0]}[{desc}]{value}"))
    if c.commands:
        specs += [_sq("1:command:->command"), _sq("*::argument:->argument")]
        return specs
    for i, p in enumerate(c.positionals, 1):
        name = p.dest.replace("_", " ")
        if p.repeat:
            specs.append(_sq(f"*:{name}:{_zsh_action(p)}"))
        else:
            specs.append(_sq(f"{i}:{':' if p.optional else ''}{name}:{_zsh_action(p)}"))
    return specs


def _zsh_function(c: Command) -> str:
    name = "_specflux" + "".join("_" + part.replace("-", "_") for part in c.path)
    lines = [f"{name}() {{"]
    if c.commands:
        lines += ["    local curcontext=\"$curcontext\" state line", "    typeset -A opt_args",
                  "    _arguments -C \\"]  # no -s: with it, an option right after a subcommand is not completed
    else:
        lines += ["    _arguments \\"]
    specs = _zsh_specs(c)
    lines += [f"        {s} \\" for s in specs[:-1]] + ([f"        {specs[-1]}"] if specs else ["        ''"])
    if c.commands:
        described = " ".join(_sq(f"{s.path[-1]}:{s.help}") for s in c.commands)
        lines += ["    case $state in",
                  "        command)",
                  f"            local -a commands=({described})",
                  f"            _describe -t commands {_sq(' '.join(('specflux', *c.path, 'command')))} commands ;;",
                  "        argument)",
                  "            case $words[1] in"]
        lines += [f"                {_sq(s.path[-1])}) {name}_{s.path[-1].replace('-', '_')} ;;" for s in c.commands]
        lines += ["            esac ;;", "    esac"]
    lines.append("}")
    return "\n".join(lines)


_ZSH_HELPERS = r'''
_specflux_dir() {
    # the .specflux folder: --root on the command line, else $SPECFLUX_ROOT, else the nearest upwards
    local dir=${SPECFLUX_ROOT:-} i
    local -a all=( ${(Q)${(z)BUFFER}} )  # the whole command line ($words is shifted under a command)
    for ((i = 1; i <= $#all; i++)); do
        case $all[i] in
            --root) dir=${all[i+1]} ;;
            --root=*) dir=${all[i]#--root=} ;;
        esac
    done
    if [[ -z $dir ]]; then
        dir=$PWD
        while [[ -n $dir && ! -d $dir/.specflux ]]; do
            dir=${dir%/*}
        done
    fi
    dir=${dir/#\~/$HOME}
    print -r -- ${dir:-.}/.specflux
}

_specflux_tasks() {
    local expl
    local -a ids
    ids=( $(_specflux_dir)/task-states/task-*-state.md(N:t) )
    ids=( ${${ids#task-}%-state.md} )
    _wanted tasks expl 'task id' compadd -a ids
}

_specflux_runs() {
    local expl
    local -a runs
    runs=( $(_specflux_dir)/runs/*/events.jsonl(N:h:t) )
    _wanted runs expl 'run id' compadd -a runs
}
'''


def zsh(root: Command, prog: str) -> str:
    functions = "\n\n".join(_zsh_function(c) for c in root.walk())
    return f"""#compdef {prog}
# {prog} completion for zsh, generated by `{prog} completion zsh` from its argument parser.
# Install: {prog} completion zsh > ~/.zfunc/_{prog}   (with fpath+=(~/.zfunc) before compinit in ~/.zshrc)
#      or: source <({prog} completion zsh)   (after compinit)
{_ZSH_HELPERS}
{functions}

if [[ "${{funcstack[1]}}" == _specflux ]]; then
    _specflux "$@"
else
    compdef _specflux {prog}
fi
"""


# --------------------------------------------------------------------- fish


def _fq(text: str) -> str:
    """`text` as one single-quoted fish word."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_FISH_HELPERS = r'''
function __specflux_words --description 'the command and subcommand typed so far'
    set -l words (commandline -opc)
    set -e words[1]
    set -l skip 0
    for w in $words
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case VALUED
                set skip 1
            case '-*'
            case '*'
                echo $w
        end
    end
end

function __specflux_at --description 'true when exactly these words are the command so far'
    set -l words (__specflux_words)
    test "$words" = "$argv"
end

function __specflux_in --description 'true when the command so far starts with these words'
    set -l words (__specflux_words)
    set -l n (count $argv)
    test (count $words) -ge $n; or return 1
    test "$words[1..$n]" = "$argv"
end

function __specflux_dir
    set -l words (commandline -opc)
    set -l dir $SPECFLUX_ROOT
    for i in (seq (count $words))
        switch $words[$i]
            case --root
                set -q words[(math $i + 1)]; and set dir $words[(math $i + 1)]
            case '--root=*'
                set dir (string replace -- --root= '' $words[$i])
        end
    end
    if test -z "$dir"
        set dir $PWD
        while test -n "$dir" -a ! -d "$dir/.specflux"
            set dir (string replace -r -- '/[^/]*$' '' $dir)
        end
    end
    test -n "$dir"; or set dir .
    echo $dir/.specflux
end

function __specflux_tasks
    for f in (__specflux_dir)/task-states/task-*-state.md
        string replace -r -- '^.*/task-(.*)-state\.md$' '$1' $f
    end
end

function __specflux_runs
    for f in (__specflux_dir)/runs/*/events.jsonl
        string replace -r -- '^.*/([^/]+)/events\.jsonl$' '$1' $f
    end
end
'''

_FISH_KIND = {"task": "-x -a '(__specflux_tasks)'", "run": "-x -a '(__specflux_runs)'", "file": "-r -F",
              "dir": "-x -a '(__fish_complete_directories)'", "text": "-x"}


def fish(root: Command, prog: str) -> str:
    valued = _always_valued(root)
    lines = [f"# {prog} completion for fish, generated by `{prog} completion fish` from its argument parser.",
             f"# Install: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
             _FISH_HELPERS.replace("VALUED", " ".join(valued)),
             f"complete -c {prog} -f"]
    for c in root.walk():
        at = f"__specflux_at {' '.join(c.path)}".rstrip()
        within = f"__specflux_in {' '.join(c.path)}" if c.path else "true"
        for s in c.commands:
            lines.append(f"complete -c {prog} -n {_fq(at)} -a {_fq(s.path[-1])} -d {_fq(s.help)}")
        for o in c.options:
            flags = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in o.names)
            if o.kind == "flag":
                value = ""
            elif o.kind == "choice":
                value = f"-x -a {_fq(' '.join(o.choices))}"
            else:
                value = _FISH_KIND[o.kind]
            condition = at if c.commands else within
            lines.append(f"complete -c {prog} -n {_fq(condition)} {flags} {value} -d {_fq(o.help)}".replace("  ", " "))
        kind = c.positional_kind()
        if not c.commands and kind != "text" and c.path:
            if kind == "choice":
                value = f"-a {_fq(' '.join(c.positionals[0].choices))}"
            else:
                value = {"task": "-a '(__specflux_tasks)'", "run": "-a '(__specflux_runs)'", "file": "-F",
                         "dir": "-a '(__fish_complete_directories)'"}[kind]
            lines.append(f"complete -c {prog} -n {_fq(within)} {value}")
    return "\n".join(lines) + "\n"
