"""Edits of a task file's text: an `Edit` replaces one span and `apply_edits` makes several at once;
the edits that add to a section, replace what a region holds, create a missing section in its
place, and write the Chain Output's subsections.

Every edit replaces only the characters it must; new lines take the file's own line ending
(`doc.newline`). `doc` is a TaskDocument.
"""

from __future__ import annotations

from specflux.base.records import record

from specflux.format.outline import content_end, line_end
from specflux.format.regions import NUMBERED, PLACEHOLDER, SECTION_NUMBERS, SECTION_TITLES, Region


@record(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Replace each edit's span; spans must not overlap."""
    out, pos = [], 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < pos:
            raise ValueError("overlapping edits")
        out.append(text[pos:e.start])
        out.append(e.text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


def _own_endings(doc, block: str) -> str:
    return block.replace("\n", doc.newline)


def append_to_region(doc, region: Region, block: str) -> Edit:
    """An edit that adds `block` after the last line the region holds; a `##` section whose only
    content is a placeholder line such as `(No sessions yet)` has that line replaced by the block."""
    text, nl = doc.text, doc.newline
    block = _own_endings(doc, block)
    body = text[region.body : region.end]
    stripped = body.strip()
    if PLACEHOLDER.fullmatch(stripped) and region.heading.level == 2:
        start = region.body + body.index(stripped)
        return Edit(start, start + len(stripped), block)
    content = body.rstrip(" \t\r\n")
    at = line_end(text, region.body + len(content) - 1) if content else region.body
    prefix = nl if at == len(text) and not text.endswith(("\n", "\r")) else ""
    suffix = nl if at < len(text) and text[at] not in "\r\n" else ""
    return Edit(at, at, prefix + nl + block + nl + suffix)


def replace_content(doc, region: Region, block: str) -> Edit:
    """An edit that replaces everything the region holds below its heading (not the blank
    lines that separate it from the next heading) with `block`."""
    body = doc.text[region.body : region.end]
    content = body.rstrip(" \t\r\n")
    if not content.strip():
        return append_to_region(doc, region, block)
    lead = len(body) - len(body.lstrip("\r\n"))
    start = region.body + lead
    return Edit(start, content_end(doc.text, region.body + len(content) - 1), _own_endings(doc, block))


def new_section(doc, key: str, block: str) -> Edit:
    """A new `## N. Title` section placed between its neighbours by number."""
    numbered = any(NUMBERED.match(r.heading.text) for r in doc.sections.values())
    title = SECTION_TITLES[key]
    heading = f"## {SECTION_NUMBERS[key]}. {title}" if numbered else f"## {title}"
    later = [r for k, r in doc.sections.items() if SECTION_NUMBERS[k] > SECTION_NUMBERS[key]]
    nl = doc.newline
    section = _own_endings(doc, f"{heading}\n\n{block}\n")
    if later:
        at = min(r.start for r in later)
        return Edit(at, at, section + nl)
    text = doc.text
    prefix = "" if text.endswith(("\n", "\r")) else nl
    return Edit(len(text), len(text), prefix + nl + section)


def chain_output_edits(doc, summary: str, downstream: str | None) -> list[Edit]:
    """Edits that write `### Summary`, and `### For Downstream Tasks` when `downstream` is
    given (or the subsection is missing), into the Chain Output. Every other subsection
    (`### Files Created`, `### Integration Notes`, ...) and any text a person wrote there stays."""
    from specflux.format.render import inert, render_chain_output

    region = doc.sections.get("chain_output")
    if region is None:
        return [doc.append_to_section("chain_output", render_chain_output(summary, downstream or ""))]
    if doc.chain_output_is_placeholder:
        return [replace_content(doc, region, render_chain_output(summary, downstream or ""))]
    summary_body = inert(summary) or "(no summary)"
    down_body = inert(downstream or "") or "None"
    summary_region = doc.find_subsection(region, "summary")
    down_region = doc.find_subsection(region, "for downstream tasks")
    edits, added = [], []
    if summary_region is not None:
        edits.append(replace_content(doc, summary_region, summary_body))
    else:
        added.append(f"### Summary\n{summary_body}")
    if down_region is not None:
        if downstream is not None:
            edits.append(replace_content(doc, down_region, down_body))
    else:
        added.append(f"### For Downstream Tasks\n{down_body}")
    if not added:
        return edits
    nl, block = doc.newline, _own_endings(doc, "\n\n".join(added))
    first_sub = next(doc.subsections(region), None)
    if summary_region is not None:  # the downstream part goes right after the summary
        at = _after_content(doc.text, summary_region)
        edits.append(Edit(at, at, nl + nl + block))
    elif first_sub is not None:  # before the first subsection, after any free text
        edits.append(Edit(first_sub.start, first_sub.start, block + nl + nl))
    else:
        edits.append(append_to_region(doc, region, "\n\n".join(added)))
    return edits


def _after_content(text: str, region: Region) -> int:
    """The offset of the line ending of the region's last non-blank line."""
    body = text[region.start : region.end].rstrip(" \t\r\n")
    return content_end(text, region.start + len(body) - 1)
