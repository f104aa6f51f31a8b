"""The static HTML report: tables, matplotlib plots (PNG, embedded), timelines and evidence.

Everything is embedded in ``report.html`` (images as data URIs), so the file
can be mailed, archived by CI or opened from disk without a server.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from pathlib import Path
from string import Template
from typing import Any

# packaged with the module (package data), so an installed kafka-chaos renders reports too
TEMPLATE = Path(__file__).resolve().parent / "templates" / "report.html"


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if v == int(v) and abs(v) < 1e12:
            return f"{int(v)}"
        return f"{v:.3f}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    try:
        import numpy as np

        if isinstance(v, np.ndarray):
            return ", ".join(map(str, v.tolist()))
        if isinstance(v, np.floating):
            return _fmt(float(v))
        if isinstance(v, np.integer):
            return str(int(v))
    except ImportError:  # pragma: no cover
        pass
    return str(v)


def table(df, columns: Sequence[str] | None = None, left: Sequence[str] = (), row_class=None, limit: int = 500) -> str:
    """An HTML table of a pandas DataFrame (first ``limit`` rows)."""
    if df is None or len(df) == 0:
        return '<p class="note">(none)</p>'
    cols = list(columns or df.columns)
    head = "".join(f'<th class="{"l" if c in left else ""}">{html.escape(c)}</th>' for c in cols)
    body = []
    for rec in df.head(limit).to_dict("records"):
        cls = row_class(rec) if row_class else ""
        cells = "".join(f'<td class="{"l" if c in left else ""}">{html.escape(_fmt(rec.get(c)))}</td>' for c in cols)
        body.append(f'<tr class="{cls}">{cells}</tr>')
    more = f'<p class="note">first {limit} of {len(df)} rows; all rows are in the CSV files</p>' if len(df) > limit else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def distribution_plots(faults, rebalances, zombies, unavailability, nightly) -> str:
    """Box plots of time-to-recover per fault type, rebalance and zombie-window lengths, unavailability,
    and the pass-rate trend per experiment."""
    plt = _plt()
    parts = []
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    ttr = faults.dropna(subset=["ttr_s"]) if len(faults) else faults
    if len(ttr):
        groups = sorted(ttr["fault_type"].fillna("unknown").unique())
        kinds = ttr["fault_type"].fillna("unknown")
        axes[0].boxplot([ttr[kinds == g]["ttr_s"] for g in groups], tick_labels=groups)
    axes[0].set_title("time to recover after fault end (s)")
    if len(rebalances) and rebalances["duration_s"].notna().any():
        axes[1].hist(rebalances["duration_s"].dropna(), bins=30, color="#5c6bc0")
    axes[1].set_title("rebalance duration (s)")
    if len(zombies):
        axes[2].hist(zombies["zombie_window_s"], bins=20, color="#ef6c00")
    axes[2].set_title("zombie window length (s)")
    if len(unavailability):
        axes[3].hist(unavailability["unowned_s"], bins=30, color="#8d6e63")
    axes[3].set_title("partition time without owner (s)")
    for ax in axes:
        ax.tick_params(labelsize=8)
    parts.append(_png(fig))
    if len(nightly):
        fig, axes = plt.subplots(1, 2, figsize=(17, 3.4))
        nights = sorted(nightly["date"].unique())  # one shared, ordered axis of nights
        pos = {d: i for i, d in enumerate(nights)}
        for exp, g in nightly.groupby("experiment"):
            g = g.sort_values("date")
            x = [pos[d] for d in g["date"]]
            axes[0].plot(x, g["pass_rate"], marker="o", label=exp)
            axes[1].plot(x, g["fault_ttr_p90_s"], marker="o", label=exp)
        for ax in axes:
            ax.set_xticks(range(len(nights)))
            ax.set_xticklabels(nights)
        axes[0].set_title("pass rate per night")
        axes[0].set_ylim(-0.05, 1.05)
        axes[1].set_title("p90 time to recover per night (s)")
        if nightly["experiment"].nunique() <= 12:
            axes[0].legend(fontsize=7)
        for ax in axes:
            ax.tick_params(labelsize=8, labelrotation=30)
        parts.append(_png(fig))
    return "\n".join(parts)


def timeline(run: str, intervals, faults, violations) -> str:
    """Ownership per partition over time for one run, fault windows shaded, violations marked."""
    plt = _plt()
    tps = sorted({(r.topic, int(r.partition)) for r in intervals.itertuples()}) if len(intervals) else []
    members = sorted(intervals["member"].unique()) if len(intervals) else []
    colors = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(15, 0.35 * max(len(tps), 3) + 1.2))
    ypos = {tp: i for i, tp in enumerate(tps)}
    for r in intervals.itertuples():
        ax.barh(ypos[(r.topic, int(r.partition))], r.end_t_s - r.start_t_s, left=r.start_t_s, height=0.7,
                color=colors(members.index(r.member) % 10), edgecolor="none")
    for f in faults.itertuples():
        if f.start_t_s is not None and not _nan(f.start_t_s):
            end = f.end_t_s if f.end_t_s is not None and not _nan(f.end_t_s) else ax.get_xlim()[1]
            ax.axvspan(f.start_t_s, end, color="#ffb74d", alpha=0.3)
            ax.text(f.start_t_s, len(tps) - 0.4, f"{f.fault_type} {f.node or ''}", fontsize=7, va="bottom")
    for v in violations.itertuples():
        if v.at_s is not None and not _nan(v.at_s):
            ax.axvline(v.at_s, color="#c62828", lw=1)
    ax.set_yticks(range(len(tps)))
    ax.set_yticklabels([f"{t}-{p}" for t, p in tps], fontsize=7)
    ax.set_xlabel("seconds since the run's first event", fontsize=8)
    ax.set_title(run, fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors(i % 10)) for i in range(len(members))]
    if members:
        ax.legend(handles, members, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def violation_blocks(violations, evidence_lines: dict[tuple[str, int], str], limit: int) -> str:
    if violations is None or len(violations) == 0:
        return '<p class="note">No checker reported a violation.</p>'
    out = []
    for rec in violations.head(limit).to_dict("records"):
        lines = []
        for seq in list(rec["evidence"]):
            line = evidence_lines.get((rec["run"], int(seq)))
            lines.append(html.escape(line if line is not None else f"(seq {seq} not in the history)"))
        at = "" if rec.get("at_s") is None or _nan(rec["at_s"]) else f" at {rec['at_s']:.3f}s"
        out.append(f'<div class="violation"><b>{html.escape(rec["checker"])}</b> in '
                   f'<code>{html.escape(rec["run"])}</code>{at}: {html.escape(rec["description"])}'
                   f'<pre>{chr(10).join(lines)}</pre></div>')
    if len(violations) > limit:
        out.append(f'<p class="note">first {limit} of {len(violations)} violations; all are in violations.csv</p>')
    return "\n".join(out)


def page(**parts: str) -> str:
    if not TEMPLATE.is_file():
        from chaos.errors import UsageError

        raise UsageError(f"{TEMPLATE}: report template missing; reinstall kafka-chaos")
    return Template(TEMPLATE.read_text()).substitute(**parts)
