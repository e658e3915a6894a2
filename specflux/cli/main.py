"""The `specflux` command: parse the arguments (`parser.py`), run the command (its function is in
the module of its group, `specflux.cli` says which), and turn what went wrong into a message and an
exit code. Nothing else lives here."""

from __future__ import annotations

import sys
from typing import Sequence

from specflux.base.errors import SpecfluxError
from specflux.cli import MODULES, find
from specflux.cli.parser import argv_needs_flow, build_parser


def _first_word(argv: Sequence[str]) -> str | None:
    """The command word of `argv` when that is plain to see (only `--root DIR` before it), else None."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return arg
        if arg.startswith("--root="):
            i += 1
        elif arg == "--root":
            i += 2
        else:  # --help, --version, an abbreviation: the full parser decides
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    word = _first_word(argv)
    known = word in MODULES
    # a word that is no command: every command built, for the choices and a "did you mean"
    parser = build_parser(full=argv_needs_flow(argv) or (word is not None and not known), only=word if known else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return find(args.command)(args)
    except SpecfluxError as e:
        from specflux.base.escape import safe

        print(safe(f"specflux: {e}" if not e.path else str(e)), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("specflux: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # what the file system refused where no file-level check caught it first
        where = f"{e.filename}: " if e.filename else ""
        print(f"specflux: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except RecursionError:
        print("specflux: a file nests too deeply to read", file=sys.stderr)
        return 1


def run() -> None:
    """The `specflux` program: `main` with the process's Ctrl-C policy. The first Ctrl-C interrupts
    (the command records and undoes what it must); every later one is ignored, so that pressing it
    again and again never cuts the clean-up short or prints a traceback on the way out."""
    import signal

    from specflux.base import interrupts

    interrupted = False

    def on_interrupt(signum, frame):
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            interrupts.pressed = True
            raise KeyboardInterrupt

    def on_hangup(signum, frame):  # the terminal closed: interrupted as by Ctrl-C, saying why
        interrupts.hang_up("its terminal closed (SIGHUP)", ("stdout", "stderr"))

    # started ignoring SIGINT (`&` from a script): real ones stay ignored, specflux's own (`flow stop`) are not
    signal.signal(signal.SIGINT, interrupts.only_our_own if signal.getsignal(signal.SIGINT) is signal.SIG_IGN
                  else on_interrupt)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup: keep ignoring it
        signal.signal(signal.SIGHUP, on_hangup)
    code = main()
    if interrupted:  # Python's exit puts back the default handler: a later Ctrl-C would kill it then
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)

