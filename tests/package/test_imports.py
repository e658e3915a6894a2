"""The one-task commands and `list` import only what they use.

Each command runs in a fresh interpreter (as the console script runs it) that then reports the
modules it loaded. pydantic alone cost ~100 ms of every `show` and `session`; the agent stack
(anthropic, httpx), GitPython, mistune and jsonata (workflows) are for other commands. Timings live in bench/
(bench_one_task.py, bench_imports.py); this only checks what can fail deterministically.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specflux.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("pydantic", "pydantic_core", "anthropic", "httpx", "httpx2", "mistune", "git", "jsonata")

PROBE = """
import json, os, sys
from specflux.cli.main import main
argv, report = json.loads(sys.argv[1]), sys.argv[2]
sys.stdout = open(os.devnull, "w")
rc = main(argv)
with open(report, "w") as f:
    json.dump({"rc": rc, "modules": sorted(sys.modules)}, f)
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """Task 1, complete with a chain output, and task 2 that depends on it (so `context 2` embeds
    an upstream), with two criteria and a session. Not a git repository."""
    root = tmp_path_factory.mktemp("imports")
    quiet = ["--root", str(root)]
    assert main(["init", str(root)]) == 0
    assert main([*quiet, "new", "Upstream", "--ac", "it works"]) == 0
    assert main([*quiet, "complete", "1", "--summary", "Built the thing", "--no-commit"]) == 0
    assert main([*quiet, "new", "Downstream", "--dep", "1", "--ac", "first", "--ac", "second"]) == 0
    assert main([*quiet, "session", "2", "--did", "started", "--no-commit"]) == 0
    return root


def imported(root: Path, tmp_path: Path, *args: str) -> set[str]:
    """The modules a fresh `specflux --root ROOT ARGS...` process loads."""
    report = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["--root", str(root), *args]), str(report)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and report.exists(), done.stderr
    result = json.loads(report.read_text())
    assert result["rc"] == 0, f"specflux {' '.join(args)} exited {result['rc']}: {done.stderr}"
    return set(result["modules"])


@pytest.mark.parametrize("args", [
    ("show", "2"),
    ("show", "2", "--json"),
    ("check", "2", "1"),
    ("uncheck", "2", "1"),
    ("session", "2", "--did", "more", "--no-commit"),
    ("context", "2"),
    ("context", "2", "--json"),
    ("list",),
    ("list", "--json"),
], ids=lambda args: " ".join(args))
def test_command_imports_nothing_it_does_not_use(workspace, tmp_path, args):
    modules = imported(workspace, tmp_path, *args)
    assert "specflux.cli" in modules  # the probe really ran specflux
    heavy = sorted({m.split(".")[0] for m in modules} & set(FORBIDDEN))
    assert not heavy, f"`specflux {' '.join(args)}` imports {', '.join(heavy)}"


@pytest.mark.parametrize("args", [
    ("show", "2"), ("show", "2", "--json"), ("check", "2", "1"), ("uncheck", "2", "1"),
    ("session", "2", "--did", "more", "--no-commit"), ("context", "2"), ("list",),
], ids=lambda args: " ".join(args))
def test_command_loads_no_dataclasses(workspace, tmp_path, args):
    """`dataclasses` imports `inspect` (and with it ast, dis, tokenize...): ~6 ms of a command
    whose floor is ~20 ms. The values these commands use are records (base/records.py)."""
    modules = imported(workspace, tmp_path, *args)
    assert "specflux.cli" in modules
    assert not {"dataclasses", "inspect"} & modules, sorted({"dataclasses", "inspect"} & modules)
    if args[0] in ("show", "context", "list"):  # (a write imports tempfile, and tempfile shutil)
        assert "shutil" not in modules, "argparse's formatter reads the terminal's width through shutil"


def test_list_and_check_build_no_model_objects(workspace, tmp_path):
    """A `list` row and a tick come from the document itself: specflux.format.model is not even loaded."""
    for args in (("list",), ("check", "2", "2")):
        assert "specflux.format.model" not in imported(workspace, tmp_path, *args), args


def test_one_task_commands_load_no_agent_presets(workspace, tmp_path):
    """The presets (and the --agent options built from them) belong to `run`, `plan` and `flow`."""
    for args in (("show", "2"), ("check", "2", "1"), ("context", "2")):
        assert "specflux.agent.presets" not in imported(workspace, tmp_path, *args), args


def test_the_default_config_file_means_the_defaults(tmp_path):
    """What `specflux init` writes reads as the built-in defaults (so reading it may skip TOML)."""
    from specflux.store.config import DEFAULT_CONFIG, Config, load_config

    path = tmp_path / "config.toml"
    path.write_text(DEFAULT_CONFIG + "\n# edited\n", encoding="utf-8")  # not byte-equal: really parsed
    assert load_config(path) == Config()


FIRST_AGENT_PROBE = """
import dataclasses, json, sys
built = []  # every dataclass made, by name
made = dataclasses._process_class
def _made(cls, *args, **kwargs):
    built.append(f"{cls.__module__}.{cls.__qualname__}")
    return made(cls, *args, **kwargs)
dataclasses._process_class = _made
from specflux.agent import command_backend
from specflux.cli.main import main
argv, report = json.loads(sys.argv[1]), sys.argv[2]
seen = []
real = command_backend.CommandBackend._run
def _run(self, *args, **kwargs):  # the moment each agent process is started
    seen.append((self.role, sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core")),
                 sorted(c for c in built if c.startswith("specflux."))))
    return real(self, *args, **kwargs)
command_backend.CommandBackend._run = _run
rc = main(argv)
with open(report, "w") as f:
    json.dump({"rc": rc, "seen": seen}, f)
"""


def probe_a_run(root: Path, tmp_path: Path, probe: str, agent: str) -> tuple[Path, subprocess.CompletedProcess]:
    """`flow start --agent command --cmd AGENT --no-sandbox` over one task in a fresh process running
    `probe`: the report it wrote, and the process."""
    assert main(["init", str(root)]) == 0
    assert main(["--root", str(root), "new", "Write a file", "--ac", "it exists"]) == 0
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "tasks"], cwd=root, check=True)
    report = tmp_path / "report.json"
    argv = ["--root", str(root), "flow", "start", "--agent", "command", "--no-sandbox", "--cmd", agent]
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(argv), str(report)], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    return report, done


def test_a_runs_first_agent_cli_starts_before_pydantic_is_imported(git_repo, tmp_path):
    """Building pydantic's models is ~0.1 s of CPU: a run's first coder (an agent CLI, which calls
    no tool) starts without it; the tools' input models and the hand-off load when first read.
    And with no dataclass made on the way (there were ~45: ~20 ms)."""
    report, done = probe_a_run(git_repo, tmp_path, FIRST_AGENT_PROBE, "echo done > out.txt")
    assert report.exists(), done.stderr
    seen = json.loads(report.read_text())["seen"]
    assert seen and seen[0][:2] == ["coder", []], seen
    # a dataclass costs ~0.4 ms to make (dataclasses exec five methods; base/records.py's `record`
    # one) and `dataclasses` imports `inspect` (~9 ms): the value classes on the way to the first
    # agent are records
    assert seen[0][2] == [], seen[0][2]


WHOLE_RUN_PROBE = """
import json, sys
from specflux.cli.main import main
argv, report = json.loads(sys.argv[1]), sys.argv[2]
rc = main(argv)
with open(report, "w") as f:
    json.dump({"rc": rc, "pydantic": sorted(m for m in sys.modules if m.split(".")[0] == "pydantic"),
               "heavy": sorted(m for m in ("dataclasses", "inspect", "difflib", "secrets") if m in sys.modules)}, f)
"""

CLI_AGENT = r"""
cat > /dev/null
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  printf '%s' '{"approved": true, "issues": [], "criteria_results": [{"criterion": "1", "met": true}]}' | @SPECFLUX@ submit-review --json - > /dev/null
else
  echo done >> out.txt
  awk '$0 == "(To be completed)" { print "### Summary\nWrote out.txt.\n\n### For Downstream Tasks\nNone."; next } { print }' "$SPECFLUX_TASK_FILE" > "$SPECFLUX_TASK_FILE.tmp" && mv "$SPECFLUX_TASK_FILE.tmp" "$SPECFLUX_TASK_FILE"
fi
"""


def test_a_run_of_agent_clis_never_imports_pydantic(git_repo, tmp_path):
    """Coder, reviewer and the run's acceptance, with an agent CLI that writes its chain output in
    the task file and hands its verdict in with `specflux submit-review`: the run reads both
    without pydantic's models (a plain verdict, handin_rules.py; the task file's hand-off,
    plain_inputs.WrittenHandoff): ~0.1 s of CPU a run process, a worker's among them. Nor,
    after a session, `dataclasses` (with `inspect`, `ast`, `tokenize`: ~6 ms), `difflib` (a merge's,
    not a lint's) or `secrets` (a hand-in key is 32 random bytes): the four workers of a queue
    end their first sessions at once, and each of them would pay that there."""
    agent = tmp_path / "agent.sh"
    agent.write_text(CLI_AGENT.replace("@SPECFLUX@", f"{sys.executable} -m specflux.cli"))
    report, done = probe_a_run(git_repo, tmp_path, WHOLE_RUN_PROBE, f"sh {agent}")
    assert report.exists(), done.stderr
    result = json.loads(report.read_text())
    assert result["rc"] == 0 and "run completed" in done.stderr, done.stderr
    assert "accepted" in done.stderr and (git_repo / "out.txt").exists(), done.stderr
    assert result["pydantic"] == [], result["pydantic"]
    assert result["heavy"] == [], result["heavy"]
