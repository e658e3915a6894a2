"""Shared helpers for the benchmark scripts: timing, medians, tables, the commands under test.

Plain Python on purpose (no hyperfine needed): every measurement is repeated, the first run(s)
are discarded as warm-up, and the cases being compared run interleaved (A, B, A, B, ...) so that a
noisy neighbour slows both sides alike. Report ratios measured in the same run, not absolute times.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable

# Backlog.md 1.52 / Taskmaster / YAML floor, medians of whole-process runs on a 2-core machine
# (shared/LIBRARIES.md, shared/peers/results-2026-11-22.md). For scale only: another run, another day.
PEERS = {
    "Backlog.md `task list --plain`": {100: 201, 1000: 583, 5000: 2143},
    "Backlog.md `task edit --check-ac 1`": {100: 221, 1000: 671, 5000: 2719},
    "Taskmaster 0.43 `list`": {100: 1807, 1000: 1958, 5000: 4267},
    "Python: read every file + YAML front matter": {100: 61, 1000: 108, 5000: 329},
}


# An installed package runs from bytecode (pip compiles it), but a checkout run with
# PYTHONDONTWRITEBYTECODE=1 (as some sandboxes and CI images set) recompiles every specflux module
# in every process: ~10 ms of `show` is then the compiler. The commands under test (and the floors:
# both sides alike) therefore run with bytecode cached in a temporary PYTHONPYCACHEPREFIX, which
# leaves the checkout untouched. SPECFLUX_BENCH_BYTECODE=0 measures the environment as it is.
BYTECODE = os.environ.get("SPECFLUX_BENCH_BYTECODE", "1") != "0"
_PYCACHE: str | None = None


def bench_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the processes under test run in (see BYTECODE)."""
    global _PYCACHE
    out = dict(os.environ if env is None else env)
    if BYTECODE:
        if _PYCACHE is None:
            _PYCACHE = tempfile.mkdtemp(prefix="specflux-bench-pycache-")
            atexit.register(shutil.rmtree, _PYCACHE, True)
        out.pop("PYTHONDONTWRITEBYTECODE", None)
        out["PYTHONPYCACHEPREFIX"] = _PYCACHE
    return out


def warm_bytecode() -> None:
    """Compile what the commands import (at start-up and on first use) before anything is timed:
    run each everyday command once in a throw-away workspace."""
    if not BYTECODE:
        return
    folder = tempfile.mkdtemp(prefix="specflux-bench-warm-")
    try:
        sf = specflux_argv()
        run([PYTHON, "-c", "import specflux.cli.main, specflux.store.manager, specflux.surface.views, specflux.format.model, specflux.store.chain, "
             "specflux.agent.context, specflux.store.summary_cache, specflux.store.lint, specflux.store.archive, json, tempfile"], check=False)
        run([*sf, "--help"], check=False)
        run([*sf, "init", folder], check=False)
        run([*sf, "--root", folder, "new", "warm-up", "--ac", "one"], check=False)
        for args in (["list"], ["list", "--json"], ["show", "1"], ["show", "1", "--json"], ["check", "1", "1"],
                     ["session", "1", "--did", "x", "--no-commit"], ["context", "1"], ["lint"], ["ready"]):
            run([*sf, "--root", folder, *args], check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bytecode_note() -> str:
    if not BYTECODE:
        return "bytecode: as the environment has it" + (" (PYTHONDONTWRITEBYTECODE=1: specflux is compiled in every process)"
                                                         if os.environ.get("PYTHONDONTWRITEBYTECODE") else "")
    return "bytecode: cached (temporary PYTHONPYCACHEPREFIX), as for an installed package"


def specflux_argv() -> list[str]:
    """The installed `specflux` console script next to this interpreter (else `python -m`)."""
    script = Path(PYTHON).parent / "specflux"
    if script.exists():
        return [str(script)]
    found = shutil.which("specflux")
    if found:
        return [found]
    return [PYTHON, "-m", "specflux.cli"]


def run(argv: Sequence[str], *, cwd=None, env=None, check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    done = subprocess.run(
        list(argv),
        cwd=cwd,
        env=bench_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {done.returncode}: {done.stderr.strip()[:2000]}")
    return done


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def compare(
    cases: dict[str, Callable[[], object]],
    runs: int,
    warmup: int = 1,
    setup: Callable[[str], object] | None = None,
) -> dict[str, list[float]]:
    """Run every case `warmup + runs` times, interleaved; return the timed runs in ms per case.

    `setup(name)` (not timed) runs before each run of each case, e.g. to restore a file.
    """
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(warmup + runs):
        for name, fn in cases.items():
            if setup is not None:
                setup(name)
            ms = timed(fn)
            if i >= warmup:
                samples[name].append(ms)
    return samples


def md(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def spread(samples: Sequence[float]) -> str:
    """`median (min-max, n)` as a compact cell."""
    return f"{md(samples):.1f} ({min(samples):.0f}-{max(samples):.0f}, n={len(samples)})"


def round_ratios(samples: dict[str, list[float]], a: str, b: str) -> list[float]:
    """Per-round ratios a/b of samples taken by `compare` (round i of a against round i of b, run
    back to back): a busy minute slows both sides of a round alike, so their ratio holds still."""
    return [x / y for x, y in zip(samples[a], samples[b]) if y]


def ratio_cell(ratios: Sequence[float]) -> str:
    """`median x (quartiles q1-q3, min-max, n)` of per-round ratios: the figure to quote."""
    if not ratios:
        return "-"
    if len(ratios) < 4:
        return f"{md(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}, n={len(ratios)})"
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return f"{md(ratios):.2f}x (IQR {q1:.2f}-{q3:.2f}, range {min(ratios):.2f}-{max(ratios):.2f}, n={len(ratios)})"


def load() -> str:
    """The machine's load (1, 5 and 15 minutes), printed beside every table of figures."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load unknown"
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def fmt_ms(ms: float) -> str:
    return f"{ms:,.1f}" if ms < 100 else f"{ms:,.0f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def verdict(value: float, target: float) -> str:
    return f"met (<= {target:g}x)" if value <= target else f"MISSED (> {target:g}x)"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(map(str, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def make_workspace(n: int, parent: Path | None = None, name: str | None = None) -> Path:
    """A fresh workspace with `n` generated tasks (see gen_tasks.py) in a temp folder."""
    sys.path.insert(0, str(HERE))
    import gen_tasks

    root = Path(tempfile.mkdtemp(prefix=f"specflux-bench-{name or n}-", dir=parent))
    gen_tasks.generate(n, root)
    return root


def machine() -> str:
    import platform

    return f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"


def header(title: str, quick: bool) -> None:
    print(f"## {title}{' (--quick)' if quick else ''}\n")
    print(f"{machine()}; specflux: `{' '.join(specflux_argv())}`; {bytecode_note()}; {load()} at the start\n")
    warm_bytecode()
