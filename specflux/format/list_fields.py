"""What `specflux list` shows of a task besides its title, read in one pass over the headings.

`list` reads every task file. `TaskDocument`'s properties (`status`, `dependencies`,
`criteria_lines`, `session_count`) give the same values but cost twice as much (regions,
generators, each criterion's text and depth); tests/format/test_document.py checks with hypothesis
that the two always agree.
"""

from __future__ import annotations

from specflux.format.criteria import count_ticked
from specflux.format.regions import ARCHIVED, SESSION, normalise_heading


def read_list_fields(doc) -> tuple[str, list[str], int, int, int]:
    """(status, dependencies, criteria done, criteria total, sessions) of a TaskDocument."""
    meta = doc.metadata
    context, progress = doc.sections.get("context"), doc.sections.get("progress")
    c_start, c_end = (context.start, context.end) if context else (-1, -1)
    p_start, p_end = (progress.start, progress.end) if progress else (-1, -1)
    criteria = None  # (body, end) of the acceptance criteria
    sessions, archived = 0, None
    for i, h in enumerate(doc.outline.headings):
        if h.level != 3:
            continue
        if c_start < h.start < c_end:
            if criteria is None and normalise_heading(h.text) == "acceptance criteria":
                criteria = (h.body, min(doc.ends[i], c_end))
        elif p_start < h.start < p_end:
            if SESSION.match(h.text):
                sessions += 1
            elif archived is None and (m := ARCHIVED.match(h.text)):
                archived = int(m.group(2)) - int(m.group(1)) + 1
    if criteria is None and doc.criteria_region is not None:  # the list under another heading
        criteria = (doc.criteria_region.body, doc.criteria_region.end)
    done, total = count_ticked(doc.text, doc.outline, *criteria) if criteria is not None else (0, 0)
    dependencies = [str(d) for d in meta.get("dependencies", [])]
    return meta["status"], dependencies, done, total, sessions + (archived or 0)
