"""Import the torchneuronx predecessor's repository into a temporary store and print its headline figures
beside ours (not a test).

    .venv/bin/python benchmarks/import_torchneuronx.py SOURCE [--ref b245405] [--no-history]

SOURCE: a checkout or bare git dir of the predecessor. "theirs" comes from its own files, "ours" from
our views over the imported run (with --history, superseded attempts are read back for the first cold
boot). Exit 1 when a figure does not hold.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.importers.figures import figures
from analytics.importers.source import open_tree
from analytics.importers.torchneuronx import import_torchneuronx
from analytics.store import LocalStore
from analytics.views import connect


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--ref", default=None)
    ap.add_argument("--no-history", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(tmp)
        t0 = time.perf_counter()
        summary = import_torchneuronx(args.source, store, ref=args.ref, history=not args.no_history)
        took = time.perf_counter() - t0
        tree, repo = open_tree(args.source, args.ref)
        con = connect(store)
        rows = figures(con, store, summary.run_id, tree, repo)
        if repo is not None:
            repo.close()
    print(f"imported {summary.commit} as {summary.run_id}: {len(summary.attempts)} attempts in {took:.1f} s")
    print("| figure | theirs | ours | holds |\n|---|---:|---:|:---:|")
    for f in rows:
        print(f"| {f.name} | {_fmt(f.theirs)} | {_fmt(f.ours)} | {'yes' if f.holds else 'NO'} |")
    return 0 if all(f.holds for f in rows) else 1


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:,.3f}".rstrip("0").rstrip(".")
    return str(x)


if __name__ == "__main__":
    raise SystemExit(main())
