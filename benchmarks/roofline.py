"""Every measured serving point of a results store beside its roofline: the achieved fraction of each bound.

Reads ``point_roofline`` (analytics/views/sql/71_report_roofline.sql) and prints one markdown table per
(run, model, server config, hardware): shape, batch, and TPOT, TTFT and output tokens/s as bound / measured with the
fraction, then the range of each fraction and how many points sit above a bound (a defect in the facts or the
formula; on the CPU, a cache can beat the measured DRAM bandwidth). Nothing is estimated: the bounds come from the
facts, the measurements from the store.

    python benchmarks/roofline.py --results results/            # make run's store (CPU points)
    neuronpipe import torchneuronx --results /tmp/pred <source> && python benchmarks/roofline.py --results /tmp/pred
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERY = """
SELECT run_id, model, server_config, hardware, mode, input_len, output_len, batch,
       tpot_bound_ms, median_tpot_ms, tpot_fraction, ttft_bound_ms, median_ttft_ms, ttft_fraction,
       output_tokens_per_s_bound, output_throughput, throughput_fraction
FROM point_roofline
WHERE tpot_bound_ms IS NOT NULL AND output_throughput IS NOT NULL AND coalesce(mode, '') <> 'sustained'
ORDER BY run_id, model, server_config, input_len, output_len, batch, point_id
"""


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    from analytics.store import LocalStore
    from analytics.views import connect

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--results", required=True, help="a local results directory")
    args = ap.parse_args(argv)
    con = connect(LocalStore(Path(args.results)))
    cur = con.execute(QUERY)
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    if not rows:
        print("no measured point with a bound in this store")
        return 1
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["run_id"], r["model"], r["server_config"], r["hardware"])].append(r)
    above = 0
    for (run, model, config, hardware), pts in groups.items():
        print(f"\n{model} · {config} · {hardware} · run {run}\n")
        print("| in:out | batch | TPOT ms bound / p50 | % | TTFT ms bound / p50 | % | out tok/s measured / bound | % |")
        print("|---|---:|---|---:|---|---:|---|---:|")
        for r in pts:
            print(
                f"| {r['input_len']}:{r['output_len']} | {r['batch']} "
                f"| {r['tpot_bound_ms']:.2f} / {r['median_tpot_ms'] or 0:.2f} | {pct(r['tpot_fraction'])} "
                f"| {r['ttft_bound_ms']:.2f} / {r['median_ttft_ms'] or 0:.1f} | {pct(r['ttft_fraction'])} "
                f"| {r['output_throughput']:.1f} / {r['output_tokens_per_s_bound']:,.0f} "
                f"| {pct(r['throughput_fraction'])} |"
            )
            above += any((r[k] or 0) > 1 for k in ("tpot_fraction", "ttft_fraction", "throughput_fraction"))
    print()
    for key, label in (("tpot_fraction", "TPOT"), ("ttft_fraction", "TTFT"), ("throughput_fraction", "tok/s")):
        vals = [r[key] for r in rows if r[key] is not None]
        print(f"{label}: {pct(min(vals))} - {pct(max(vals))} of the bound over {len(vals)} points")
    print(f"points above a bound: {above} of {len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
