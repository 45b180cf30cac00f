"""Plot step time against N and D from a results JSON of ``run.py --bench scaling``.

    .venv/bin/python benchmarks/plot.py benchmarks/results/core_s1.json docs/figures/perf_scaling.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402


def main(src: str, dst: str) -> None:
    whole = json.load(open(src))
    res = whole["results"]["scaling"]
    execution = whole["machine"].get("execution", "passes")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, xname, fixed in ((axes[0], "N", "rows", "D = 200"),
                                  (axes[1], "D", "features", "N = %d" % res["D"][0]["rows"])):
        pts = res[key]
        xs = np.array([p[xname] for p in pts], dtype=float)
        for m, style in ((2, "o-"), (6, "s-")):
            ts = np.array([p[f"m{m}_s"] for p in pts])
            kern = pts[-1][f"m{m}_kernel"]
            ax.loglog(xs, ts, style, label=f"m = {m} ({kern} kernel), slope "
                      f"{res[f'slope_{key}_m{m}']:.2f}")
        ref = ts[0] * xs / xs[0]
        ax.loglog(xs, ref, "k:", label="slope 1 (from the first m = 6 point)")
        loads = ", ".join(f"{p['load']:.0f}" for p in pts)
        ax.set_title(f"naive step vs {key} ({fixed}); load avg {loads}", fontsize=9)
        ax.set_xlabel("rows N" if key == "N" else "features D")
        ax.set_ylabel("step time (s), Spark local[2], " + execution)
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{int(x):,}" for x in xs], fontsize=8)
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print("wrote", dst)


if __name__ == "__main__":
    main(*sys.argv[1:3])
