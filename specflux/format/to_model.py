"""A TaskDocument read into the model's values: `TaskState` and its criteria, sessions, archived
summary, chain inputs and chain output (specflux.format.model, imported only when asked for:
`list` and `check` never build them).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from specflux.format.fields import bullet_items, labelled_fields, parse_usage, plain
from specflux.format.outline import line_number
from specflux.format.regions import FROM_TASK

if TYPE_CHECKING:
    from specflux.format.model import ArchivedSummary, ChainInput, ChainOutput, Criterion, Session, TaskState

_LINK = re.compile(r"\[(?:Full details:\s*)?([^\]]+)\](?:\(([^)]+)\))?")
_SHA = re.compile(r"\b[0-9a-f]{7,64}\b")


def to_state(doc, task_id: str | None = None) -> "TaskState":
    from specflux.format.model import TaskState

    written_id, title = doc.title
    meta = doc.metadata
    return TaskState(
        id=task_id or str(meta.get("task_id", written_id or "")),
        title=title,
        metadata=meta,
        status=meta["status"],
        dependencies=doc.dependencies,
        epic=_field(doc, "Epic"),
        repository=_field(doc, "Repository"),
        requirements=doc.body_text(doc.find_subsection(doc.sections.get("context"), "requirements")).strip(),
        criteria=criteria(doc),
        chain_inputs=chain_inputs(doc),
        archived_summary=archived_summary(doc),
        sessions=sessions(doc),
        chain_output=chain_output(doc),
    )


def _field(doc, label: str) -> str | None:
    """The inline value of `**Label:**` in the Context section."""
    context = doc.sections.get("context")
    if context is None:
        return None
    m = re.search(r"(?:^|(?<=\r))[ \t]*\*\*" + label + r"\s*:?\*\*:?[ \t]*([^\r\n]*)", doc.text[context.body : context.end], re.M | re.I)
    return m.group(1).strip() if m else None


def criteria(doc) -> list["Criterion"]:
    from specflux.format.model import Criterion

    return [
        Criterion(index=i, text=text, checked=checked, line=line_number(doc.text, box), depth=depth)
        for i, box, checked, text, depth in doc.criteria_lines
    ]


def sessions(doc) -> list["Session"]:
    from specflux.format.model import Session

    out = []
    for number, stamp, region in doc.session_regions:
        fields = labelled_fields(doc.body_text(region))
        did_lines = fields.get("did", [])
        out.append(
            Session(
                number=number,
                timestamp=stamp,
                did=bullet_items(did_lines),
                issues=plain(fields.get("issues", [])),
                next=plain(fields.get("next", [])),
                line=line_number(doc.text, region.start),
                usage=parse_usage(plain(fields.get("usage", []))),
            )
        )
    return out


def archived_summary(doc) -> "ArchivedSummary | None":
    from specflux.format.model import ArchivedSummary

    if doc.archived_region is None:
        return None
    first, last, region = doc.archived_region
    body = doc.body_text(region)
    fields = labelled_fields(body)
    link = _LINK.search("\n".join(line for line in body.split("\n") if "**" not in line))
    commits = plain(fields.get("commits", []))
    return ArchivedSummary(
        first=first,
        last=last,
        duration=plain(fields.get("duration", [])),
        accomplishments=plain(fields.get("accomplishments", [])),
        commits=_SHA.findall(commits),
        more_commits=int(more.group(1)) if (more := re.search(r"\((\d+) more\)", commits)) else 0,
        archive=(link.group(2) or link.group(1)).strip() if link else None,
        line=line_number(doc.text, region.start),
    )


def chain_inputs(doc) -> list["ChainInput"]:
    from specflux.format.model import ChainInput

    out = []
    for region in doc.subsections(doc.sections.get("chain_inputs")):
        m = FROM_TASK.match(region.heading.text)
        if not m:
            continue
        quoted = [re.sub(r"^[ \t]*>[ ]?", "", ln) for ln in doc.body_text(region).split("\n") if ln.lstrip().startswith(">")]
        out.append(
            ChainInput(
                task_id=m.group(1),
                title=(m.group(2) or "").strip(),
                body="\n".join(quoted).strip(),
                line=line_number(doc.text, region.start),
            )
        )
    return out


def chain_output(doc) -> "ChainOutput | None":
    from specflux.format.model import ChainOutput

    region = doc.sections.get("chain_output")
    if region is None or doc.chain_output_is_placeholder:
        return None
    summary = doc.find_subsection(region, "summary")
    downstream = doc.find_subsection(region, "for downstream tasks")
    return ChainOutput(
        summary=doc.body_text(summary).strip(),
        downstream=doc.body_text(downstream).strip(),
        body=doc.body_text(region).strip(),
    )
