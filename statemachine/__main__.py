"""``python -m statemachine [--check]``: regenerate ``pipeline.asl.json`` (or check it is in sync)."""

from __future__ import annotations

import argparse
import sys

from statemachine.build import ASL_PATH, render, write


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m statemachine", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the checked-in file differs")
    args = p.parse_args(argv)
    if args.check:
        in_sync = ASL_PATH.exists() and ASL_PATH.read_text() == render()
        print(f"{ASL_PATH}: {'in sync' if in_sync else 'OUT OF SYNC (run python -m statemachine)'}")
        return 0 if in_sync else 1
    print(f"wrote {write()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
