"""Confining an agent CLI (a preset, a user's own `[agents.NAME]`, `--agent command`) the way an
API agent's `run_command` is confined (sandbox.py): bubblewrap or Landlock, writes only inside
the repository (or the lane's worktree), never in `.git/` or `.specflux/`, and in a private
temporary folder. Reads stay unrestricted.

An agent CLI still writes its task through `specflux` (`check`, `session --no-commit`,
`submit-review`, `submit-tasks`), run inside the same sandbox, so these stay writable:
`.specflux/task-states/` (the run puts back any other task's file it changed), `archives/`
and `cache/` (the engine keeps nothing it believes there), and the folder of its hand-in file
(SPECFLUX_HANDIN: a reviewer's or planner's alone, a private folder the run made for this one step,
outside the repository: handin_channel.py). Under bubblewrap, in a workflow run, the other tasks'
files are mounted read-only one by one, so a deletion of one during the session is a person's; a
run's reviewer or planner, which hands in rather than writing a task file, gets the whole of
`task-states/` read-only (one mount, under either sandbox).
The engine's own state stays out of reach (store/state_dir.py, docs/engine-state.md): the lock of
the session's task, in the git directory, is made beforehand, and the agent's `specflux` takes it
through a read-only descriptor (flock needs no more); the engine's private folder (holds, keys,
run locks) is hidden (bubblewrap, and Landlock where it has a mount namespace).

The CLI's own files (its login, settings, session logs, caches) go to a private HOME, a fresh
folder beside the temporary one, into which the preset's `home` files are copied first; the XDG
folders point inside it too. Nothing the CLI writes there outlives the session.

Given an `Allowlist` (egress.py), the network is confined too where the sandbox can: the CLI
reaches only the hosts of its preset, through an egress proxy the session runs outside the
sandbox (`Confined.proxy`, closed by the caller): under bubblewrap from a network namespace of its
own (netbridge.py inside relays to the proxy's unix socket), under Landlock (ABI 4) with TCP
connections allowed only to the proxy's port and the loopback ports of its base URLs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from specflux.base.records import Factory, record

if TYPE_CHECKING:
    from specflux.agent.egress import Allowlist, EgressProxy
    from specflux.agent.presets import Preset
    from specflux.agent.sandbox import Sandbox

# Folders of .specflux/ the agent writes through specflux's own commands.
TASK_FOLDERS = ("task-states", "archives", "cache")
# Other tasks' files held read-only one by one under bubblewrap, up to this many. bubblewrap reads
# its mount table again for every mount, so each costs more than the last: measured on a 2-core VM
# (50 runs of `bwrap ... true`), 8 mounts add ~2 ms to a session's start, 16 ~4 ms, 32 ~12 ms,
# 49 ~21 ms (the `true` alone: ~10 ms). Beyond it none is held: what a hold buys is small (a run
# puts back whatever a session changes in another task's file anyway, held or not); only the
# notice of a deletion can then no longer say whose it was.
HELD_AT_MOST = 16


@record
class Confined:
    """How an agent CLI runs: `argv` (None: unconfined, as `sh -c`), the environment to add,
    and the line to say when it starts (a warning where no sandbox is available), if any."""

    sandbox: "Sandbox"
    argv: list[str] | None = None
    env: dict[str, str] = Factory(dict)
    notice: str | None = None
    held: frozenset[str] = frozenset()  # task files the agent cannot change or delete (bubblewrap: not its own)
    proxy: "EgressProxy | None" = None  # the network's one way out, where it is confined to some hosts
    network_confined: bool = False  # no network but `proxy` (none at all without one)


def confine(line: str, root: Path, workdir: Path, setting: str, preset: "Preset",
            handin: str | None = None, task_id: str | None = None, own_task_file: str | None = None,
            allowlist: "Allowlist | None" = None, tasks_read_only: bool = False) -> Confined:
    """The shell command line `line` of an agent CLI, to run with cwd `root`, in the sandbox
    `setting` names (`[agent] sandbox`, or "off" for `--no-sandbox`). `workdir` is a fresh
    folder of the session's, removed after it: the private HOME and temporary folder go there.
    `task_id`: the session's task, whose lock the agent's own `specflux` takes. With `allowlist`,
    the hosts the CLI may reach where the sandbox confines the network. `tasks_read_only` (a run's
    reviewer or planner, which write no task file: they hand in): `.specflux/task-states/` is not
    writable at all, and every task file in it is held (one mount, however many tasks)."""
    from specflux.agent.sandbox import choose, temp_env
    from specflux.store.state_dir import prepare_task_lock

    sandbox = choose(setting)
    if task_id:
        prepare_task_lock(root, task_id)
    if not sandbox.confined:
        notice = None
        if sandbox.name == "none":
            notice = (f"the agent CLI is not sandboxed: {sandbox.reason}; it can write anywhere this user can "
                      '(--no-sandbox, or [agent] sandbox = "off" in .specflux/config.toml, silences this)')
        return Confined(sandbox, notice=notice)
    home, tmp = workdir / "home", workdir / "tmp"
    for folder in (home, tmp):
        folder.mkdir(parents=True, exist_ok=True)
    _copy_home(preset, home)
    writable = [str(home)]
    specflux_dir = root / ".specflux"
    if specflux_dir.is_dir() and not specflux_dir.is_symlink():
        for name in TASK_FOLDERS:
            folder = specflux_dir / name
            if tasks_read_only and name == "task-states":
                continue  # under the read-only .specflux/ (sandbox.read_only_entries)
            if not folder.is_symlink():
                folder.mkdir(exist_ok=True)
                writable.append(str(folder))
    if handin:
        folder = Path(handin).parent
        folder.mkdir(parents=True, exist_ok=True)
        writable.append(str(folder))
    from specflux.store.state_dir import state_home

    env = {"HOME": str(home), **temp_env(tmp), "SPECFLUX_STATE_HOME": str(state_home()),
           "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_STATE_HOME": str(home / ".local" / "state")}
    proxy, connect = None, None
    network_confined = allowlist is not None and sandbox.confines_network
    if network_confined and sandbox.name == "bwrap" and not allowlist.entries:
        connect = []  # no host to reach: a network namespace of its own, and no proxy or relay to start
    elif network_confined:
        from specflux.agent.egress import EgressProxy

        proxy = EgressProxy(allowlist)
    if proxy is not None and sandbox.name == "landlock":
        proxy.start()
        connect = [proxy.port, *allowlist.loopback_ports()]
        url = f"http://127.0.0.1:{proxy.port}"
        env.update({name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                           "all_proxy")})
        env.update({"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1"})
    elif proxy is not None:
        proxy.start(workdir / "egress.sock")
        connect = []
    argv = sandbox.argv(line, root, tmp, also=writable, connect=connect)
    held: frozenset[str] = frozenset()
    if tasks_read_only:
        held = _task_files(root, None, at_most=None)
    elif sandbox.name == "bwrap":  # mounts on top, before the command: what bwrap alone can also do
        held = _task_files(root, own_task_file) if own_task_file else frozenset()
        at = argv.index("--")
        argv[at:at] = [arg for path in sorted(held) for arg in ("--ro-bind", path, path)]
    if sandbox.name == "bwrap" and proxy is not None:  # the relay to the proxy, first inside the namespace
        at = argv.index("--")
        argv[at + 1:at + 1] = _bridge(proxy.path, allowlist.loopback_ports())
    notice = None
    if sandbox.name == "landlock" and not sandbox.top_level:
        notice = ("the agent CLI is sandboxed with Landlock, which cannot hide the engine's private folder "
                  "here (no mount namespace): it can read the runs' event keys (docs/engine-state.md)")
    return Confined(sandbox, argv=argv, env=env, notice=notice, held=held, proxy=proxy,
                    network_confined=network_confined)


def _bridge(path: str, ports: list[int]) -> list[str]:
    import sys

    from specflux.agent import netbridge

    return [sys.executable, "-I", "-S", os.path.abspath(netbridge.__file__), "--socket", path,
            *(arg for port in ports for arg in ("--port", str(port))), "--"]


def _task_files(root: Path, own: str | None, at_most: int | None = HELD_AT_MOST) -> frozenset[str]:
    """The task files of other tasks than `own`, to mount read-only one by one under bubblewrap in
    a workflow run's session (whose changes to them the run puts back anyway; `specflux run` leaves
    them writable, for a `specflux complete` that wires dependents): a mount point cannot be deleted
    or replaced from inside, while a person outside still can, so a deletion seen after the session
    is theirs (agent/restore.py says so). None beyond `at_most` (None: no limit)."""
    folder = root / ".specflux" / "task-states"
    own_path = os.path.realpath(own) if own else None
    try:
        names = [e for e in os.scandir(folder) if e.is_file(follow_symlinks=False) and e.name.endswith(".md")]
    except OSError:
        return frozenset()
    if at_most is not None and len(names) > at_most + 1:  # each mount costs bubblewrap more than the last: none (said)
        return frozenset()
    real = os.path.realpath(folder)  # (regular files, not links: the folder's real path and the name)
    return frozenset(p for p in (os.path.join(real, e.name) for e in names) if p != own_path)


def _copy_home(preset: "Preset", home: Path) -> None:
    """Copy the preset's `home` files (its login and settings) from the real HOME."""
    from specflux.agent.presets import home_sources

    for source, rel in home_sources(preset):
        target = home / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if os.path.isdir(source):
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)
        except OSError:  # unreadable: the CLI says what it misses
            pass
