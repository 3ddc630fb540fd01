"""Shared figure style, so every figure in the paper looks the same."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless under papermill and in CI

import matplotlib.pyplot as plt  # noqa: E402

PALETTE = ["#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#2e4057"]


def apply_style() -> None:
    plt.rcParams.update({
        "figure.figsize": (7.0, 3.4),
        "figure.dpi": 110,
        "savefig.dpi": 200,
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
        "legend.frameon": False,
        "svg.fonttype": "none",
        "pdf.fonttype": 42,
        # Fixed metadata so re-rendering the same data gives the same bytes.
        "svg.hashsalt": "iolab",
    })


def syscall_cost_figure(measured, per_rep):  # type: ignore[no-untyped-def]
    """Left: ns/call of every measured batch, by variant and repetition, with
    per-repetition medians and CIs. Right: ns/call against run order, to show
    drift and that warm-up was enough."""
    import numpy as np

    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(7.2, 3.2), gridspec_kw={"width_ratios": [1.1, 1]})
    variants = sorted(measured["variant"].unique())
    reps = sorted(measured["rep"].unique())
    rng = np.random.default_rng(0)
    width = 0.8 / max(len(reps), 1)
    for vi, variant in enumerate(variants):
        for ri, rep in enumerate(reps):
            rows = measured[(measured["variant"] == variant) & (measured["rep"] == rep)]
            x0 = vi + (ri - (len(reps) - 1) / 2) * width
            ax.scatter(x0 + rng.uniform(-width / 3, width / 3, len(rows)), rows["ns_per_call"],
                       s=3, alpha=0.25, color=PALETTE[vi % len(PALETTE)], linewidths=0)
            s = per_rep[(per_rep["variant"] == variant) & (per_rep["rep"] == rep)]
            if not s.empty:
                r = s.iloc[0]
                ax.errorbar([x0], [r["median_ns"]],
                            yerr=[[r["median_ns"] - r["ci_low_ns"]], [r["ci_high_ns"] - r["median_ns"]]],
                            fmt="_", color="black", markersize=10, capsize=2, lw=1)
    ax.set_xticks(range(len(variants)), variants)
    ax.set_ylabel("ns per call")
    ax.set_title(f"per batch, {len(reps)} repetitions")
    lo, hi = measured["ns_per_call"].quantile([0.005, 0.995])
    pad = (hi - lo) * 0.15 + 1
    ax.set_ylim(lo - pad, hi + pad)
    for vi, variant in enumerate(variants):
        rows = measured[(measured["variant"] == variant) & (measured["rep"] == reps[0])]
        ax_t.plot(rows["seq"], rows["ns_per_call"], ".", ms=2, alpha=0.5,
                  color=PALETTE[vi % len(PALETTE)], label=variant)
    ax_t.set_xlabel(f"batch position in run order (repetition {reps[0]})")
    ax_t.set_ylim(lo - pad, hi + pad)
    ax_t.set_title("drift over the run")
    ax_t.legend(markerscale=4)
    fig.tight_layout()
    return fig
