"""specflux installs like a Python tool: a wheel built from the repository carries every file of the
package, installs into a fresh virtual environment and runs `specflux demo` there; `pipx install .`
and `uv tool install .` work; the version is written in one place.

The wheel is built and installed once per test run (module fixtures). Dependencies come from the
package index through pip's own cache; where they cannot be had (no network, no mirror), the tests
skip and say so. A build or install that fails for any other reason fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import specflux

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

# What pip, pipx and uv print when the index cannot be reached or holds no such version.
OFFLINE = re.compile(
    r"No matching distribution found|Could not find a version that satisfies|NewConnectionError|"
    r"Temporary failure in name resolution|Network is unreachable|Failed to establish a new connection|"
    r"Connection refused|ConnectTimeout|Max retries exceeded|Failed to fetch|error sending request|"
    r"dns error|No solution found when resolving|not found in the package registry",
    re.I,
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for installed tools: nothing that would put the checkout on the import path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "SPECFLUX_ROOT")
           and not k.startswith("ANTHROPIC_")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def run(*cmd, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def install_or_skip(done: subprocess.CompletedProcess, what: str) -> None:
    """Fail on a failed install, unless it failed only because the index cannot be reached."""
    if done.returncode == 0:
        return
    output = done.stdout + done.stderr
    if OFFLINE.search(output):
        pytest.skip(f"{what}: the dependencies cannot be installed here (no package index reachable):\n"
                    f"{output[-1500:]}")
    pytest.fail(f"{what} failed (exit {done.returncode}):\n{output[-4000:]}")


def tracked_files() -> list[str]:
    """The files of the checkout as git sees them: tracked, plus new ones that are not ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the wheel is checked against git's file list")
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [name for name in out.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the checkout's files (no build/, egg-info or caches), so that building writes
    nothing into the working tree and sees what a clone would."""
    dest = tmp_path_factory.mktemp("source") / "specflux"
    for name in tracked_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", out, source, cwd=source)
    install_or_skip(done, "building the wheel")  # build isolation fetches setuptools
    (built,) = out.glob("specflux-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed; its bin/ folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    done = run(bin_dir / "python", "-m", "pip", "install", "--no-compile", wheel, cwd=env_dir)  # no .pyc: seconds
    install_or_skip(done, "installing the wheel")
    return bin_dir


def test_the_wheel_holds_every_file_of_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {name for name in tracked_files()
                if name.startswith("specflux/") and "__pycache__" not in name.split("/")}
    missing = sorted(expected - names)
    assert not missing, f"files of the package missing from the wheel (pyproject.toml's packaging): {missing}"
    for required in ("specflux/templates/task-state.md", "specflux/importers/__init__.py",
                     "specflux/demo/data/task-1-session-1.jsonl"):
        assert required in names
    assert any(n.startswith("specflux/demo/data/flow/recordings/") and n.endswith(".jsonl") for n in names)
    assert not [n for n in names if n.endswith((".pyc", ".pyo")) or "__pycache__" in n]
    assert {n.split("/")[0] for n in names} == {"specflux", f"specflux-{specflux.__version__}.dist-info"}


def test_the_version_is_written_once(wheel, installed):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "specflux.__version__"}

    metadata = zipfile.ZipFile(wheel).read(f"specflux-{specflux.__version__}.dist-info/METADATA").decode()
    assert re.search(r"^Version: (.+)$", metadata, re.M).group(1) == specflux.__version__
    done = run(installed / "specflux", "--version", cwd=installed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"specflux {specflux.__version__}"


def test_the_installed_wheel_runs_the_demo(installed, tmp_path):
    where = run(installed / "python", "-c", "import specflux; print(specflux.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), "the demo must run the installed copy"

    done = run(installed / "specflux", "demo", tmp_path / "demo", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ready next: #3" in done.stdout
    assert "run completed" in done.stdout
    states = tmp_path / "demo" / ".specflux" / "task-states"
    # The story itself is test_demo's; here: the packaged recordings were found and replayed.
    assert {f"task-{i}-state.md" for i in (1, 2, 3, 4, 5)} <= {p.name for p in states.iterdir()}

    # The packaged template: init and new work from the installed package alone.
    work = tmp_path / "work"
    work.mkdir()
    assert run(installed / "specflux", "init", cwd=work).returncode == 0
    done = run(installed / "specflux", "new", "From the wheel", "--ac", "it works", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "## 1. Context" in (work / ".specflux" / "task-states" / f"task-{done.stdout.strip()}-state.md").read_text()


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> Path:
    """pipx and uv in a virtual environment of their own; its bin/ folder."""
    env_dir = tmp_path_factory.mktemp("tools") / "env"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    install_or_skip(run(bin_dir / "python", "-m", "pip", "install", "--no-compile", "pipx", "uv", cwd=env_dir), "installing pipx and uv")
    return bin_dir


def check_tool(bin_dir: Path, work: Path) -> None:
    exe = bin_dir / "specflux"
    assert exe.exists(), f"no specflux in {bin_dir}: {sorted(p.name for p in bin_dir.iterdir())}"
    done = run(exe, "--version", cwd=work)
    assert done.returncode == 0 and done.stdout.strip() == f"specflux {specflux.__version__}", done.stderr
    assert run(exe, "init", cwd=work).returncode == 0
    done = run(exe, "new", "Installed as a tool", cwd=work)
    assert done.returncode == 0, done.stderr
    assert run(exe, "list", cwd=work).stdout.count("Installed as a tool") == 1


def test_pipx_install_from_the_repository(tools, source, tmp_path):
    home = tmp_path / "pipx"
    env = clean_env(PIPX_HOME=str(home / "home"), PIPX_BIN_DIR=str(home / "bin"), PIPX_MAN_DIR=str(home / "man"))
    done = run(tools / "pipx", "install", "--pip-args=--no-compile", source, cwd=tmp_path, env=env)
    install_or_skip(done, "pipx install .")
    (tmp_path / "work").mkdir()
    check_tool(home / "bin", tmp_path / "work")


def test_uv_tool_install_from_the_repository(tools, source, tmp_path):
    home = tmp_path / "uv"
    env = clean_env(UV_TOOL_DIR=str(home / "tools"), UV_TOOL_BIN_DIR=str(home / "bin"),
                    UV_PYTHON_DOWNLOADS="never")
    done = run(tools / "uv", "tool", "install", "--python", sys.executable, source, cwd=tmp_path, env=env)
    install_or_skip(done, "uv tool install .")
    (tmp_path / "work").mkdir()
    check_tool(home / "bin", tmp_path / "work")
