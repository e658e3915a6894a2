"""What the commands print besides their own lines: JSON, a change's notices, problems on stderr."""

from __future__ import annotations

import json
import sys


def emit_json(data) -> None:
    """`data` as indented JSON on stdout (the one JSON printer of every `--json`)."""
    from specflux.base.escape import safe_json

    print(safe_json(json.dumps(data, indent=2, ensure_ascii=False)))


def notices(outcome) -> None:
    """What a change has to say beside its result (an outcome's `notices`), on stderr."""
    for line in outcome.notices:
        print(f"specflux: {line}", file=sys.stderr)


def problems(lines) -> int:
    """Print each problem on stderr; 1 if there were any (the output above them still stands)."""
    from specflux.base.escape import safe

    for line in lines:
        print(f"specflux: {safe(line)}", file=sys.stderr)
    return 1 if lines else 0
