"""`python -m specflux.demo [DIR]` runs the walk-through; `--record [DIR]` re-records its sessions."""

import sys
from pathlib import Path

from specflux.demo.tour import record, run_demo

if sys.argv[1:2] == ["--record"]:
    record(Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent / "data")
else:
    sys.exit(run_demo(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
