"""Size management: warn past 50 KB, move old sessions to the archive file past 75 KB.

Archiving moves whole session entries, verbatim and in order, to
`.specflux/archives/task-<id>-archive.md` and leaves one `### Archived Summary (Sessions a-b)` in
the progress log; a later run extends that summary instead of adding another. Invariant: every
session ever written is, byte for byte, in exactly one of the two files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.base.records import record
from specflux.store.config import kb
from specflux.format.document import TaskDocument
from specflux.format.edits import Edit, apply_edits
from specflux.format.fields import bullet_items, labelled_fields
from specflux.format.regions import Region
from specflux.base.files import read_text
from specflux.format.outline import content_end
from specflux.store.values import CommitRequest, Outcome, TaskStore

if TYPE_CHECKING:
    from specflux.base.files import ChangeSet

ACCOMPLISHMENTS_LIMIT = 800
COMMITS_LIMIT = 40


@record(frozen=True)
class ArchiveResult:
    state: str
    archive: str
    first: int  # first and last session moved by this run
    last: int


@record(frozen=True)
class _Moved:
    number: int
    stamp: str | None
    text: str  # verbatim: heading through the last non-blank line
    did: list[str]


def fit(task_id: str, doc: TaskDocument, store: TaskStore, changes: ChangeSet, outcome: Outcome, force: bool = False) -> str:
    """The task's text, archived if it is past the limit (or `force`); the archive write is queued
    in `changes`. Returns the text unchanged when nothing needs to move."""
    cfg = store.ws.config.archive
    limit = cfg.archive_kb * 1024
    if not force and _size(doc.text) <= limit:
        return doc.text
    archive_path = store.ws.archive_path(task_id)
    existing = changes.pending.get(archive_path)
    if existing is None:
        existing = read_text(archive_path) if archive_path.is_file() else None
    keep = cfg.keep_sessions
    result = archive_text(task_id, doc, keep, existing, _commit_lookup(store, task_id), store.ws.relative(archive_path))
    # Past the limit, keep fewer sessions (down to the latest one) until the file fits; this also
    # applies when the file holds no more than keep_sessions sessions and nothing moved yet.
    while _size(result.state if result else doc.text) > limit and keep > 1:
        keep -= 1
        result = archive_text(task_id, doc, keep, existing, _commit_lookup(store, task_id), store.ws.relative(archive_path))
    if result is None:
        if _size(doc.text) > limit:
            outcome.notices.append(f"{doc.path}: {kb(_size(doc.text))} and nothing left to archive (the latest session alone is that large)")
        return doc.text
    if _size(result.state) > limit:
        outcome.notices.append(f"{doc.path}: still {kb(_size(result.state))} after archiving: the latest session is kept in full")
    changes.write(archive_path, result.archive)
    outcome.archived.append(f"sessions {result.first}-{result.last} -> {store.ws.relative(archive_path)}")
    return result.state


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _commit_lookup(store: TaskStore, task_id: str):
    cache: dict[str, str] = {}

    def lookup(numbers: list[int]) -> list[str]:
        git = store.git
        if git is None:
            return []
        if not cache:
            for c in reversed(git.find_commits({"Specflux-Task": task_id})):
                session = c.trailers.get("Specflux-Session", "")
                cache.setdefault(session, c.short)
        return [cache[str(n)] for n in numbers if str(n) in cache]

    return lookup


def archive_text(task_id: str, doc: TaskDocument, keep: int, existing_archive: str | None, commits, archive_link: str) -> ArchiveResult | None:
    """Pure: the new state text and archive text with all but the last `keep` sessions moved.

    None when there is nothing to move.
    """
    sessions = doc.session_regions
    if len(sessions) <= keep:
        return None
    moving = sessions[: len(sessions) - keep] if keep > 0 else sessions
    nl = doc.newline
    moved = [_moved(doc, number, stamp, region) for number, stamp, region in moving]

    archived = doc.archived_region
    previous = doc.archived_summary() if archived else None
    first = previous.first if previous else moved[0].number
    last = max(m.number for m in moved)
    start_stamp = previous.duration.split(" - ")[0] if previous and previous.duration else (moved[0].stamp or "?")
    end_stamp = moved[-1].stamp or "?"
    did = [m.did[0] for m in moved if m.did]
    accomplishments = "; ".join(x for x in [previous.accomplishments if previous else "", *did] if x)
    if len(accomplishments) > ACCOMPLISHMENTS_LIMIT:
        accomplishments = accomplishments[: ACCOMPLISHMENTS_LIMIT - 1].rstrip() + "…"
    written = previous.commits if previous else []
    elided = previous.more_commits if previous else 0  # counted by an earlier run but not listed
    shas = [*written, *commits([m.number for m in moved])]
    more = len(shas) - COMMITS_LIMIT + elided
    commit_text = ", ".join(shas[:COMMITS_LIMIT]) + (f", … ({more} more)" if more > 0 else "")
    summary = "\n".join(
        [
            f"### Archived Summary (Sessions {first}-{last})",
            f"**Duration:** {start_stamp} - {end_stamp}",
            f"**Accomplishments:** {accomplishments or 'see the archive'}",
            f"**Commits:** {commit_text or 'none'}",
            f"[Full details: {archive_link}]",
        ]
    ).replace("\n", nl)

    edits: list[Edit] = []
    removals = [region for _, _, region in moving]
    if archived is not None:
        region = archived[2]
        edits.append(Edit(region.start, _content_stop(doc, region), summary))
        edits += [Edit(r.start, r.end, "") for r in removals]
    else:
        head, *rest = removals
        edits.append(Edit(head.start, head.end, summary + nl + nl))
        edits += [Edit(r.start, r.end, "") for r in rest]
    state = apply_edits(doc.text, edits)

    if existing_archive is None:
        title = doc.title[1]
        existing_archive = (
            f"# Task #{task_id}: {title} — Archived Sessions{nl}{nl}"
            f"Sessions moved here from the task-state file when it grew past its size limit,{nl}"
            f"verbatim and in order. specflux appends to this file; it never rewrites it.{nl}"
        )
    archive = existing_archive
    if not archive.endswith(("\n", "\r")):
        archive += nl
    for m in moved:
        archive += nl + m.text + nl
    return ArchiveResult(state, archive, moved[0].number, last)


def _content_stop(doc: TaskDocument, region: Region) -> int:
    body = doc.text[region.start : region.end].rstrip(" \t\r\n")
    return content_end(doc.text, region.start + len(body) - 1)


def _moved(doc: TaskDocument, number: int, stamp: str | None, region: Region) -> _Moved:
    did = bullet_items(labelled_fields(doc.body_text(region)).get("did", []))
    return _Moved(number, stamp, doc.text[region.start : _content_stop(doc, region)], did)


def archive_task(store: TaskStore, task_id: str, force: bool = False, commit: bool = True) -> Outcome:
    """`specflux archive ID`: apply the size rules now (or move old sessions regardless, `force`),
    and commit the task file with its archive so that no session ever leaves git's history."""
    outcome = Outcome(task_id)
    with store.changing([task_id], outcome) as pending:
        doc = store.load(task_id)
        text = fit(task_id, doc, store, pending.files, outcome, force=force)
        if text != doc.text:
            pending.files.write(store.path(task_id), text)
            if commit:
                moved = "; ".join(outcome.archived)
                pending.commit = CommitRequest(
                    subject=f"task {task_id}: archive {moved.split(' -> ')[0]}",
                    trailers={"Specflux-Task": task_id, "Specflux-Status": doc.status},
                )
    return outcome
