"""The static HTML report: tables, matplotlib plots (PNG, embedded), timelines and evidence.

Everything is embedded in ``report.html`` (images as data URIs), so the file
can be mailed, archived by CI or opened from disk without a server.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from chaos.history import HISTORY_FILE

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
    # in a scrolling box: a wide table scrolls by itself instead of widening the page (narrow screens)
    return f'<div class="scroll"><table><tr>{head}</tr>{"".join(body)}</table></div>{more}'


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


def _no_data(text: str) -> str:
    """What stands where a plot would have no data: a sentence, never an empty frame."""
    return f'<p class="note nodata">{html.escape(text)}</p>'


def distribution_plots(faults, rebalances, zombies, unavailability, nightly) -> str:
    """Box plots of time-to-recover per fault type, rebalance and zombie-window lengths, unavailability,
    and the pass-rate trend per experiment.

    Only panels with data are drawn; each panel without data is one sentence instead ("no faults in this
    archive"), so the page never shows an empty frame.
    """
    plt = _plt()
    parts: list[str] = []
    notes: list[str] = []
    panels: list[tuple[str, Any]] = []
    ttr = faults.dropna(subset=["ttr_s"]) if len(faults) else faults
    if len(ttr):
        kinds = ttr["fault_type"].fillna("unknown")
        groups = sorted(kinds.unique())
        panels.append(("time to recover after fault end (s)",
                       lambda ax: ax.boxplot([ttr[kinds == g]["ttr_s"] for g in groups], tick_labels=groups)))
    else:
        notes.append("No faults in this archive." if not len(faults) else
                     "No time to recover: no fault in this archive was followed by a Stable group sample.")
    reb = rebalances["duration_s"].dropna() if len(rebalances) else None
    if reb is not None and len(reb):
        panels.append(("rebalance duration (s)", lambda ax: ax.hist(reb, bins=30, color="#5c6bc0")))
    else:
        notes.append("No completed rebalance in this archive.")
    if len(zombies):
        panels.append(("zombie window length (s)",
                       lambda ax: ax.hist(zombies["zombie_window_s"], bins=20, color="#ef6c00")))
    else:
        notes.append("No zombie windows in this archive.")
    if len(unavailability):
        panels.append(("partition time without owner (s)",
                       lambda ax: ax.hist(unavailability["unowned_s"], bins=30, color="#8d6e63")))
    else:
        notes.append("No partition was without an owner in this archive.")
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(4.3 * len(panels), 3.6), squeeze=False)
        for ax, (title, draw) in zip(axes[0], panels, strict=True):
            draw(ax)
            ax.set_title(title)
            ax.tick_params(labelsize=8)
        parts.append(_png(fig))
    parts.extend(_no_data(n) for n in notes)
    if len(nightly):
        fig, axes = plt.subplots(1, 2, figsize=(17, 3.4))
        nights = sorted(nightly["date"].unique())  # one shared, ordered axis of nights
        pos = {d: i for i, d in enumerate(nights)}
        have_ttr = nightly["fault_ttr_p90_s"].notna().any()
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
        if not have_ttr:
            fig.delaxes(axes[1])  # no empty frame: the sentence below says why
        parts.append(_png(fig))
        if not have_ttr:
            parts.append(_no_data("No time to recover on any night: no p90 trend to draw."))
    else:
        parts.append(_no_data("No nights in this archive: no trend to draw."))
    return "\n".join(parts)


def timeline(run: str, intervals, faults, violations) -> str:
    """Ownership per partition over time for one run, fault windows shaded, violations marked."""
    if not len(intervals):
        return _no_data(f"{run}: no partition was owned in this run (no assignment recorded): no timeline to draw.")
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


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """One evidence event as written in its run's history: the line's 1-based number and text."""

    line_no: int
    text: str


def run_href(run_dir: str | Path, report_dir: Path) -> str:
    """A relative URL from the report directory to a run directory (a link that survives moving both together).

    Relative, not ``file://``: the report is archived or served beside its results (``--out`` next to
    ``RESULTS``), so the link must work wherever the pair is copied.
    """
    rel = os.path.relpath(Path(run_dir).resolve(), report_dir.resolve())
    return urllib.parse.quote(Path(rel).as_posix()) + "/"


def violation_blocks(violations, evidence_lines: dict[tuple[str, int], EvidenceLine], limit: int,
                     run_dirs: dict[str, str] | None = None, report_dir: Path | None = None) -> str:
    """One block per violation: checker, run (linked to its run directory), description, and each evidence
    event as its history line, linked to the run's ``history.jsonl`` and named by line number and seq."""
    if violations is None or len(violations) == 0:
        return '<p class="note">No checker reported a violation.</p>'
    out = []
    for rec in violations.head(limit).to_dict("records"):
        run = rec["run"]
        path = (run_dirs or {}).get(run)
        href = run_href(path, report_dir) if path is not None and report_dir is not None else None
        lines = []
        for seq in list(rec["evidence"]):
            ev = evidence_lines.get((run, int(seq)))
            if ev is None:
                lines.append(f'<li>seq {int(seq)}: not in the history</li>')
                continue
            where = (f'<a href="{html.escape(href)}{HISTORY_FILE}">{HISTORY_FILE}</a> line {ev.line_no}'
                     if href is not None else f"{HISTORY_FILE} line {ev.line_no}")
            lines.append(f'<li id="{_anchor(run, int(seq))}">{where} (seq {int(seq)})'
                         f'<pre>{html.escape(ev.text)}</pre></li>')
        at = "" if rec.get("at_s") is None or _nan(rec["at_s"]) else f" at {rec['at_s']:.3f}s"
        run_html = (f'<a href="{html.escape(href)}"><code>{html.escape(run)}</code></a>' if href is not None
                    else f"<code>{html.escape(run)}</code>")
        evidence = f'<ul class="evidence">{"".join(lines)}</ul>' if lines else '<p class="note">no evidence events named</p>'
        out.append(f'<div class="violation"><b>{html.escape(rec["checker"])}</b> in '
                   f'{run_html}{at}: {html.escape(rec["description"])}{evidence}</div>')
    if len(violations) > limit:
        out.append(f'<p class="note">first {limit} of {len(violations)} violations; all are in violations.csv</p>')
    return "\n".join(out)


def _anchor(run: str, seq: int) -> str:
    """The id of one evidence event in the page (``#ev-<run>-<seq>``), for links to it."""
    return "ev-" + "".join(c if c.isalnum() else "-" for c in run) + f"-{seq}"


#: CSS added to the template's: scrolling tables and a page usable at phone width (390 px)
READABLE_CSS = """<style>
  .scroll { overflow-x: auto; max-width: 100%; -webkit-overflow-scrolling: touch; }
  .scroll table { margin: 0; }
  .scroll td:first-child, .scroll th { white-space: nowrap; }  /* dates and headers: one line, the box scrolls */
  .meta, h3, .violation, .note, code { overflow-wrap: anywhere; }
  ul.evidence { padding-left: 18px; margin: 4px 0 12px; font-size: 13px; }
  ul.evidence pre { margin: 2px 0 6px; }
  .flaky { background: #ef6c00; }
  @media (max-width: 600px) {
    body { margin: 10px; }
    h1 { font-size: 21px; }
    .card { min-width: 0; flex: 1 1 40%; padding: 6px 10px; }
  }
</style>
"""


def page(**parts: str) -> str:
    if not TEMPLATE.is_file():
        from chaos.errors import UsageError

        raise UsageError(f"{TEMPLATE}: report template missing; reinstall kafka-chaos")
    # the viewport line makes phones lay the page out at their width instead of a zoomed-out desktop one
    return (Template(TEMPLATE.read_text()).substitute(**parts)
            .replace("</head>", '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
                     + READABLE_CSS + "</head>", 1))
