"""Text for the parts specflux writes: new task files, sessions, chain outputs and inputs.

Everything here returns text with "\\n" line endings; the document layer converts to the file's own.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from string import Template
from typing import Any, Iterable


def now_stamp() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M")


def render_task(
    template: str,
    *,
    task_id: str,
    title: str,
    metadata: dict[str, Any],
    epic: str | None = None,
    repository: str | None = None,
    requirements: str = "",
    criteria: Iterable[str] = (),
    dependencies: Iterable[str] = (),
) -> str:
    fields = ""
    if epic:
        fields += f"**Epic:** {epic}\n"
    if repository:
        fields += f"**Repository:** {repository}\n"
    if fields:
        fields += "\n"
    deps = list(dependencies)
    chain_inputs = ""
    if deps:
        waiting = ", ".join(f"#{d}" for d in deps)
        chain_inputs = f"## 2. Chain Inputs\n\n(Filled in when {waiting} complete{'s' if len(deps) == 1 else ''})\n\n"
    items = "\n".join(f"- [ ] {c}" for c in criteria) or "- [ ] (describe how to verify this task)"
    return Template(template).safe_substitute(
        id=task_id,
        title=title,
        metadata=metadata_json(metadata),
        context_fields=fields,
        requirements=requirements.strip() or "(describe the task in 2-5 sentences)",
        criteria=items,
        chain_inputs=chain_inputs,
    )


def metadata_json(metadata: dict[str, Any]) -> str:
    """One key per line, values compact: `"dependencies": [100, 101]`, as in the seed's examples."""
    members = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in metadata.items()]
    return "{\n" + ",\n".join(members) + "\n}"


def _labelled(label: str, text: str) -> str:
    text = text.strip() or "None"
    if "\n" in text:
        return f"**{label}:**\n{text}"
    return f"**{label}:** {text}"


def render_session(number: int, timestamp: str, did: list[str], issues: str, next_steps: str, usage: str | None = None) -> str:
    lines = [f"### Session {number} - {timestamp}", "**Did:**"]
    lines += [f"- {item.strip()}" for item in did if item.strip()] or ["- (nothing recorded)"]
    lines += ["", _labelled("Issues", issues), "", _labelled("Next", next_steps)]
    if usage:
        lines += ["", f"**Usage:** {usage}"]
    return "\n".join(lines)


def render_chain_output(summary: str, downstream: str = "") -> str:
    parts = ["### Summary", summary.strip() or "(no summary)"]
    parts += ["", "### For Downstream Tasks", downstream.strip() or "None"]
    return "\n".join(parts)


def quote(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in re.split(r"\r\n|\n|\r", text.strip()))


def render_chain_input(task_id: str, title: str, summary: str, downstream: str, link: str) -> str:
    lines = [f"### From Task #{task_id}: {title}", quote(summary)]
    if downstream.strip() and downstream.strip().lower() != "none":
        lines += [">", quote(downstream)]
    lines += ["", f"[Full chain output]({link})"]
    return "\n".join(lines)
