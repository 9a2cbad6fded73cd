"""`neuronpipe lanes`: list lanes in plan order, with their boxes and (with -l) what each needs, the gate
it runs behind and its config fields (default, help, [min..max] for numbers)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lanes", help="list the lanes in plan order")
    p.add_argument(
        "-l", "--long", action="store_true", help="also list each lane's config fields (defaults, help, bounds)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipeline.config import describe
    from pipeline.lanes import plan_order

    for spec in plan_order():
        print(f"{spec.name:<15} {','.join(spec.boxes):<10} {spec.summary}")
        if args.long:
            deps = [f"needs {', '.join(spec.needs)}"] if spec.needs else []
            if spec.gate:
                deps.append("gate: a failure stops the rest of its box and fails the run")
            gates = [g.name for g in plan_order() if g.gate and g.order < spec.order and set(g.boxes) & set(spec.boxes)]
            if gates:
                deps.append(f"runs behind gate {', '.join(gates)}")
            print(f"    {'; '.join(deps) if deps else 'needs nothing'}")
            cfg = spec.config_class()
            for name, help_text, default, bounds in describe(cfg) if cfg else []:
                print(f"    {name:<24} {default!r:<20} {help_text}" + (f" [{bounds}]" if bounds else ""))
    return 0
