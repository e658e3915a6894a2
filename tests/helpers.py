"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

from specflux.cli import main


def run(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    """`specflux --root ROOT ARGS...` in-process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["--root", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys, root: Path, *args: str) -> str:
    """Like `run`, asserting exit 0; returns stdout."""
    code, out, err = run(capsys, root, *args)
    assert code == 0, f"specflux {' '.join(args)} -> {code}: {err}"
    return out


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (not gone, not a zombie); needs /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")
