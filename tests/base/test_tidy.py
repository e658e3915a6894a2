"""base/tidy.py: throw-away folders removed in a background thread, all of them by the time the
process exits."""

import subprocess
import sys
from pathlib import Path

from specflux.base.tidy import remove_later, wait


def _folder(parent: Path, name: str) -> Path:
    folder = parent / name
    (folder / "home" / ".cache").mkdir(parents=True)
    (folder / "home" / ".cache" / "x").write_text("x")
    (folder / "prompt.md").write_text("p")
    return folder


def test_a_folder_handed_over_is_removed(tmp_path: Path):
    folders = [_folder(tmp_path, f"f{i}") for i in range(5)]
    for folder in folders:
        remove_later(folder)
    wait()
    assert not any(folder.exists() for folder in folders)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_folder_already_gone_is_no_error(tmp_path: Path):
    remove_later(tmp_path / "never-made")
    keep = _folder(tmp_path, "kept")
    wait()
    assert keep.is_dir()


def test_the_process_removes_what_it_handed_over_before_it_exits(tmp_path: Path):
    folders = [_folder(tmp_path, f"f{i}") for i in range(20)]
    code = ("import sys; from specflux.base.tidy import remove_later\n"
            "for f in sys.argv[1:]: remove_later(f)\n")  # exits at once: atexit waits for the thread
    subprocess.run([sys.executable, "-c", code, *map(str, folders)], check=True)
    assert not any(folder.exists() for folder in folders)
