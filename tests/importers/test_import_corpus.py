"""Every file under ../shared/corpus imported as `specflux import` would read it: no task is lost
(each line that looks like a task is a task or a located warning; each Backlog.md file is a task;
each feature is a task), no marker is left in a title, and reading again gives the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

from specflux.importers.apply import read_source

# a list item or paragraph whose head is an id, with or without a checkbox, markers or bold in front
LOOKS_LIKE_A_TASK = re.compile(
    r"^\s{0,3}(?:(?:[-*+]|\d+[.)])\s+)?(?:\[.\]\s+)?(?:\[[^\]]{1,12}\]\s*)*(?:\*\*|__)?([Tt](?:-[A-Z]{1,4}-?|-)?\d+(?:\.\d+)*[a-zA-Z]?)"
    r"(?:\*\*|__)?(?:[:.)]?\s|\s*[-–—]\s|$)")
MARKER = re.compile(r"\[\s*(?:P|US\s*-?\d+|Story(?:\s*-?\s*\d+)?|P\?)\s*\]", re.I)
BACKLOG = ("backlog-md", "ariadne")  # the corpus's Backlog.md task files (`<repo>__<file name>`)
NOT_SOURCES = {"SOURCES.md"}  # the corpus's own index
PROGRESS_LOGS = ".txt"  # claude-progress.txt: read beside a feature_list.json, not a source of its own


def visible_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) outside code fences and HTML comments, as a reader of the file sees them."""
    out, fence, comment = [], None, False
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        opener = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence:
            fence = None if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence) else fence
            continue
        if opener:
            fence = opener.group(1)
            continue
        if comment or "<!--" in line:
            comment = "-->" not in line.split("<!--")[-1] if "<!--" in line else "-->" not in line
            line = re.sub(r"<!--.*?(-->|$)", "", line)
            if not line.strip():
                continue
        out.append((number, line))
    return out


def import_file(path: Path, tmp_path: Path):
    """The file read as `specflux import` reads it (a Backlog.md file inside a backlog/tasks folder)."""
    if path.name.split("__", 1)[0] in BACKLOG:
        folder = tmp_path / path.stem / "backlog"
        (folder / "tasks").mkdir(parents=True)
        (folder / "tasks" / path.name.split("__", 1)[1]).write_bytes(path.read_bytes())
        return read_source(folder, None, "backlog")
    return read_source(path, None, path.name)


def test_every_file_of_the_corpus_imports_without_losing_a_task(corpus_files, tmp_path):
    sources = [p for p in corpus_files if p.name not in NOT_SOURCES and p.suffix != PROGRESS_LOGS]
    assert len(sources) >= 30
    tasks = 0
    for path in sources:
        result = import_file(path, tmp_path)
        again = import_file(path, tmp_path / "again")
        assert [(d.task_id, d.title, d.dependencies) for d in again.drafts] == \
            [(d.task_id, d.title, d.dependencies) for d in result.drafts], path.name
        assert not [d.title for d in result.drafts if MARKER.search(d.title)], f"{path.name}: a marker in a title"
        assert len({d.task_id for d in result.drafts}) == len(result.drafts), f"{path.name}: an id twice"
        tasks += len(result.drafts)
        if path.name.split("__", 1)[0] in BACKLOG:
            assert len(result.drafts) == 1, path.name
        elif path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            features = data if isinstance(data, list) else data["features"]
            assert len(result.drafts) == len(features), path.name
        else:
            said = {d.line for d in result.drafts} | {w.line for w in result.warnings}
            known = {d.task_id.upper() for d in result.drafts}  # `- T012 can run beside T006` is about T012
            lost = [(n, line) for n, line in visible_lines(path.read_text(encoding="utf-8"))
                    if (m := LOOKS_LIKE_A_TASK.match(line)) and n not in said and m.group(1).upper() not in known]
            assert not lost, f"{path.name}: lines that look like tasks, neither imported nor warned about: {lost[:5]}"
    assert tasks >= 1800
