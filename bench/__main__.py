"""Run every benchmark, print a table, write bench/results/bench.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import (
    coldjoin,
    daemon,
    hostile,
    join,
    peer,
    signed,
    startup,
    sync,
    validate,
    viewpull,
    views,
)

SUITES = {
    "b1": validate.run,
    "sync": sync.run,
    "views": views.run,
    "viewpull": viewpull.run,
    "daemon": daemon.run,
    "fresh": daemon.fresh_rows,
    "many": daemon.many_rows,
    "startup": startup.run,
    "hostile": hostile.run,
    "join": join.run,
    "peer": peer.run,
    "signed": signed.run,
    "coldjoin": coldjoin.run,
}


def main() -> int:
    wanted = sys.argv[1:] or list(SUITES)
    rows = [row for name in wanted for row in SUITES[name]()]
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "bench.json").write_text(json.dumps(rows, indent=2) + "\n")
    width = max(len(r["name"]) for r in rows)
    print(f"{'benchmark':<{width}}  {'memsync ms':>10}  {'raw ms':>8}  {'ratio':>6}  target")
    for r in rows:
        print(
            f"{r['name']:<{width}}  {r['memsync_ms']:>10.1f}  {r['raw_ms']:>8.1f}  "
            f"{r['ratio']:>6.2f}  {r['target']}"
        )
    print(f"\nwritten: {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
