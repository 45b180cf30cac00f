"""Markdown tables from results JSON files of ``run.py`` (used for docs/performance.md).

    .venv/bin/python benchmarks/report.py benchmarks/results/*.json
"""

from __future__ import annotations

import json
import sys


def f(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def naive(r):
    print(f"\n### naive ({r['rows']:,} x {r['features']}, blocks of {r['block_rows']:,} rows, "
          f"{r['blocks']} blocks; plain numpy step {r['numpy_step_s']:.1f} s = "
          f"{r['numpy_ns_per_cell']:.0f} ns/cell)\n")
    print("| m | kernel | Spark step (s) (all reps) | cells/s | vs numpy | in-memory 1 core (s) | "
          "in-memory vs numpy | Spark == in-memory | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in r["steps"]:
        reps = ", ".join(f"{t:.1f}" for t in s["spark_all_s"])
        print(f"| {s['m']} | {s['kernel']} | {s['spark_s']:.2f} ({reps}) | "
              f"{s['spark_cells_per_s'] / 1e6:.1f} M | {s['spark_vs_numpy']:.2f}x | "
              f"{s['inmemory_1core_s']:.2f} | {s['inmemory_vs_numpy']:.2f}x | "
              f"{r['checks']['m=%d spark == in-memory' % s['m']]} | {s['load']} |")
    for s in r["steps"]:
        if "max_abs_diff_vs_float64" in s:
            print(f"\nm = {s['m']}: max |exact - float64 numpy| = {s['max_abs_diff_vs_float64']:.2e} nats")


def overhead(r):
    print(f"\n### overhead ({r['rows']:,} x {r['features']}, m = {r['m']})\n")
    print("| what | seconds (reps) |\n|---|---|")
    print("| `SparkBackend.run` | " + ", ".join(f"{t:.1f}" for t in r["run_s"]) + " |")
    print("| bare pass over the cached blocks | " + ", ".join(f"{t:.1f}" for t in r["bare_pass_s"]) + " |")
    print("| kernel pass: wall | " + ", ".join(f"{k['wall_s']:.1f}" for k in r["kernel_pass"]) + " |")
    print("| kernel pass: kernel seconds summed over blocks | "
          + ", ".join(f"{k['kernel_sum_s']:.1f}" for k in r["kernel_pass"]) + " |")
    print("| same kernel in-process, 1 core | " + ", ".join(f"{t:.1f}" for t in r["inmemory_1core_s"]) + " |")
    print(f"\nload {r['load_start']} -> {r['load_end']}")


def fixed(r):
    print("\n### fixed cost (100 x 5)\n")
    print(f"naive median {r['naive_median_s']:.2f} s (min {r['naive_min_s']:.2f}); pairwise median "
          f"{r['pairwise_median_s']:.2f}; bare count() job median {r['bare_count_median_s']:.2f}; "
          f"load {r['load_start']} -> {r['load_end']}")
    print("naive: " + ", ".join(f"{t:.2f}" for t in r["naive_step_s"]))
    print("pairwise: " + ", ".join(f"{t:.2f}" for t in r["pairwise_step_s"]))


def scaling(r):
    for key, x in (("N", "rows"), ("D", "features")):
        print(f"\n### scaling in {key}\n")
        print("| N | D | block rows | m=2 (s) | kernel | m=6 (s) | kernel | == in-memory | load |")
        print("|---|---|---|---|---|---|---|---|---|")
        for p in r[key]:
            print(f"| {p['rows']:,} | {p['features']} | {p['block_rows']:,} | {p['m2_s']:.2f} | {p['m2_kernel']} | "
                  f"{p['m6_s']:.2f} | {p['m6_kernel']} | {p['m6_equal_inmemory']} | {p['load']} |")
        print(f"\nslope m=2: {r[f'slope_{key}_m2']:.2f}; slope m=6: {r[f'slope_{key}_m6']:.2f}")


def pairwise(r):
    print(f"\n### pairwise ({r['rows']:,} x {r['features']}; naive blocks {r['naive_block_rows']:,} rows, "
          f"pairwise blocks {r['pairwise_block_rows']:,} rows)\n")
    print("| m | naive (s) | pairwise count pass (s) | pairwise state pass (s) | pairwise step (s) | ratio |")
    print("|---|---|---|---|---|---|")
    for i, (a, c, p, s) in enumerate(zip(r["naive_step_s"], r["pairwise_count_s"], r["pairwise_pass_s"],
                                         r["pairwise_step_s"])):
        print(f"| {i + 1} | {a:.2f} | {c:.2f} | {p:.2f} | {s:.2f} | {s / a:.2f} |")
    print("\n" + ", ".join(f"{k} = {v:.2f}" for k, v in r["ratios"].items()))
    print(f"\ncached bytes with state after step 3: {r['cached_bytes_with_state']:,}; checks {r['checks']}; "
          f"load {r['load_start']} -> {r['load_end']}")


def peers(r):
    for key in ("mrmr_spark", "skfeature"):
        if key not in r:
            continue
        p = r[key]
        print(f"\n### peers: {key} ({p['rows']:,} x {p['features']}, k = {p['k']})\n")
        print(json.dumps({k: v for k, v in p.items() if k not in ("ours", "peer")}, indent=1))
        peer = p["peer"]
        if key == "mrmr_spark":
            print(f"peer: {peer['seconds']:.1f} s finished={peer['finished']} selected={peer['selected']} load={peer['load']}")
        else:
            for m, q in peer.items():
                print(f"peer {m}: {q['seconds']:.1f} s finished={q['finished']} selected={q['selected']} load={q['load']}")
        for m, o in p["ours"].items():
            print(f"ours {m}: {f(o.get('seconds'))} s (prepare {f(o.get('prepare_s'))}, in-memory core "
                  f"{f(o.get('inmemory_core_s'))}) identical={o['identical_to_inmemory']} "
                  f"selected={o.get('selected')} load={o.get('load')} {o.get('error', '')}")


def e2e(r):
    print(f"\n### e2e ({r['rows']:,} x {r['features']})\n")
    print(json.dumps(r, indent=1, default=str)[:6000])


def main(paths):
    for path in paths:
        res = json.load(open(path))
        print(f"\n## {path} (scale {res['scale']}, started {res.get('started')})")
        for name, r in res["results"].items():
            if "error" in r:
                print(f"\n### {name}: ERROR {r['error']}")
                continue
            globals()[name](r)


if __name__ == "__main__":
    main(sys.argv[1:])
