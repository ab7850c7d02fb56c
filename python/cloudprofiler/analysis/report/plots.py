"""The report's figures, drawn with matplotlib from ReportData and returned as inline SVG.

No pyplot: each figure is a `matplotlib.figure.Figure` rendered inside an rc_context, so a user's own pyplot
state and backend (a notebook's) are left as they were. Text stays text (svg.fonttype none) and every figure gets
its own id salt, so several SVGs live in one page without clashing ids. Marks that can be many (task bars) are
rasterized inside the SVG.
"""
from __future__ import annotations

import functools
import heapq
import io
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import format as fmt
from .data import SKETCH_NOTE, ReportData, hops_shown, of_hop

LOCAL, REMOTE = "#4477aa", "#ee7733"  # the local / remote colours of every figure (Fig. 18 style)
LOCAL_BOX, REMOTE_BOX = "#a9c4e4", "#f5c39a"  # the same, light, for latency boxes
FAILED, RETRIED = "#cc3311", "#222222"
UNLISTED = "#bbbbbb"  # attempts whose stage the task table does not list yet (a running application)
WIDTH_IN = 10.5
STAGES_DRAWN = 40  # stage distributions: the longest-running stages beyond this are left out (and said so)
CHANNELS_DRAWN = 8  # throughput: the busiest channels
STRAGGLERS_LABELLED = 1  # per stage
RASTERIZE_OVER = 2000  # task bars drawn as an image inside the SVG beyond this many
LOG_OVER = 30  # duration axes turn logarithmic when their values span more than this factor

STYLE = {
    "svg.fonttype": "none", "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"], "font.size": 9, "axes.titlesize": 10,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#e5e5e5",
    "grid.linewidth": 0.6, "axes.axisbelow": True, "axes.edgecolor": "#888888", "legend.frameon": False,
    "legend.fontsize": 8, "figure.dpi": 100, "savefig.dpi": 150,
}


@dataclass
class Plot:
    key: str  # stable name: the section's id in the page
    title: str
    caption: str  # what the figure shows, one line
    svg: "str | None" = None  # None: no data to draw, `note` says why
    note: str = ""  # a remark shown under the title (why nothing is drawn, or what was left out)


def all_plots(data: ReportData) -> list[Plot]:
    return [draw(data) for draw, _ in PLOTS]


def _styled(draw):
    """Draw inside the report's style (rcParams apply when artists are made, so around the whole figure)."""
    @functools.wraps(draw)
    def styled(data: ReportData) -> Plot:
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return draw(data)
    return styled


def _render(fig, key: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"cloudprofiler-{key}"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(height_in: float, **subplots):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    return fig, fig.subplots(**subplots)


def _duration_axis(axis, values=None) -> None:
    """Tick labels as durations ('10 us'), the values being ns; a log scale when `values` (positive ones) span
    more than LOG_OVER (a narrower range would show no decade tick on a log axis)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    positive = np.asarray(values if values is not None else [], dtype=float)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if len(positive) and positive.max() > LOG_OVER * positive.min():
        (axis.axes.set_yscale if axis is axis.axes.yaxis else axis.axes.set_xscale)("log")
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.duration(v)))
    axis.set_minor_formatter(NullFormatter())


def _stage_colours(stage_ids) -> dict:
    """A colour per stage id; the stage ids that are missing (NaN: attempts of a running application whose records
    came before the driver's task table listed them) are left out."""
    import matplotlib

    palette = matplotlib.colormaps["tab20"].colors
    ordered = sorted(set(int(s) for s in stage_ids if pd.notna(s)))
    return {s: palette[(2 * i) % 20 + (2 * i // 20) % 2] for i, s in enumerate(ordered)}


# --- task timeline -----------------------------------------------------------------------------------------------

def _task_times(data: ReportData) -> pd.DataFrame:
    """Start and end in seconds since the reference start; Spark's launch and finish (on the same axis) where an
    attempt has no TSC records."""
    tasks = data.tasks
    start = tasks["start_t_ns"].astype(float).fillna(tasks["launch_t_ns"].astype(float))
    end = tasks["end_t_ns"].astype(float).fillna(tasks["finish_t_ns"].astype(float))
    return tasks.assign(start_s=start / 1e9, end_s=end / 1e9).dropna(subset=["start_s", "end_s"])


def _executor_order(executor_id: str):
    text = str(executor_id)
    return (0, 0, "") if text == "driver" else (1, int(text), "") if text.isdigit() else (2, 0, text)


def _slots(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Lane of each attempt within its executor: the first lane free at its start (attempts sorted by start)."""
    free: list[tuple[float, int]] = []  # (end, slot) of busy lanes
    idle: list[int] = []
    slots = np.empty(len(starts), dtype=int)
    for i in np.argsort(starts, kind="stable"):
        while free and free[0][0] <= starts[i]:
            heapq.heappush(idle, heapq.heappop(free)[1])
        slot = heapq.heappop(idle) if idle else len(free) + len(idle)
        slots[i] = slot
        heapq.heappush(free, (ends[i], slot))
    return slots


@_styled
def timeline(data: ReportData) -> Plot:
    plot = Plot("timeline", "Task timeline per executor",
                "One bar per task attempt, from its start to its end record, coloured by stage; one row per "
                "concurrent task slot of each executor.")
    tasks = _task_times(data) if not data.tasks.empty else data.tasks
    if tasks.empty:
        plot.note = "No task attempts were recorded (the plugin's task logging was off or no job ran)."
        return plot
    if data.tasks_sampled:
        plot.note = (f"{fmt.count(len(data.tasks))} of {fmt.count(data.tasks_total)} attempts drawn: every failed "
                     "or retried one and a uniform sample of the others.")
    from matplotlib.collections import PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    tasks = tasks.assign(executor_id=tasks["executor_id"].astype(str))
    rows, labels, y = [], [], 0.0
    for executor in sorted(tasks["executor_id"].unique(), key=_executor_order):
        part = tasks[tasks["executor_id"] == executor]
        slots = _slots(part["start_s"].to_numpy(), part["end_s"].to_numpy())
        rows.append(part.assign(y=y + slots))
        name = "driver" if executor == "driver" else f"executor {executor}"
        labels.append((y + slots.max() / 2, f"{name}\n{part['host'].iloc[0]}"))
        y += slots.max() + 1.6
    tasks = pd.concat(rows)
    span = max(tasks["end_s"].max() - tasks["start_s"].min(), 1e-9)
    left = tasks["start_s"].to_numpy()
    right = np.maximum(tasks["end_s"].to_numpy(), left + span / 800)  # the shortest attempts stay visible
    bottom, top = tasks["y"].to_numpy() - 0.4, tasks["y"].to_numpy() + 0.4
    verts = np.stack([np.column_stack(c) for c in ((left, bottom), (left, top), (right, top), (right, bottom))], 1)
    colours = _stage_colours(tasks["stage_id"])
    failed = (tasks["status"] != "SUCCESS").to_numpy()
    retried = (tasks["attempt_number"] > 0).to_numpy()
    edges = np.where(failed, FAILED, np.where(retried, RETRIED, "none"))
    fig, ax = _figure(min(1.4 + 0.22 * y, 9.0))
    bars = PolyCollection(verts, facecolors=[colours[int(s)] if pd.notna(s) else UNLISTED for s in tasks["stage_id"]],
                          edgecolors=edges,
                          linewidths=np.where(failed | retried, 1.2, 0.0))
    bars.set_rasterized(len(tasks) > RASTERIZE_OVER)
    ax.add_collection(bars)
    ax.plot(right[failed], tasks["y"].to_numpy()[failed], "x", color=FAILED, ms=6, mew=1.6)
    ax.set_xlim(left.min() - span * 0.01, right.max() + span * 0.01)
    ax.set_ylim(y - 1.0, -1.0)
    ax.set_yticks([p for p, _ in labels], [t for _, t in labels])
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("seconds since the application's start (reference clock)")
    stage_ids = sorted(colours)
    handles = [Patch(color=colours[s], label=f"stage {s}") for s in stage_ids[:12]]
    if len(stage_ids) > 12:
        handles.append(Patch(color="#dddddd", label=f"{len(stage_ids) - 12} more stages"))
    if tasks["stage_id"].isna().any():
        handles.append(Patch(color=UNLISTED, label="not in the task table yet"))
    if failed.any():
        handles.append(Line2D([], [], color=FAILED, marker="x", ls="", mew=1.6, label="failed attempt"))
    if retried.any():
        handles.append(Patch(facecolor="white", edgecolor=RETRIED, label="retry (attempt > 0)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    plot.svg = _render(fig, plot.key)
    return plot


# --- per-stage task durations ------------------------------------------------------------------------------------

@_styled
def stage_durations(data: ReportData) -> Plot:
    plot = Plot("stages", "Task durations per stage",
                "Box: 25th-75th percentile with the median; whiskers: 5th and 95th percentile; dot: mean; dashes: "
                "fastest and slowest; red points: stragglers, the worst named (partition, executor). Percentiles are "
                "Spark's percentile_approx: observed durations, their rank within 0.01% of the exact one.")
    stats = data.stage_durations
    if not stats.empty:
        stats = stats.dropna(subset=["stage_id"])  # attempts not in the task table yet have no stage
    if stats.empty:
        plot.note = "No task has a duration from TSC records (task logging off, or every attempt unbounded)."
        return plot
    if len(stats) > STAGES_DRAWN:
        order = data.stages.assign(length=data.stages["end_t_ns"] - data.stages["start_t_ns"])
        keep = order.nlargest(STAGES_DRAWN, "length")[["stage_id", "stage_attempt"]]
        stats = stats.merge(keep).sort_values(["stage_id", "stage_attempt"], ignore_index=True)
        plot.note = f"The {STAGES_DRAWN} longest-running of {len(data.stage_durations)} stage attempts drawn."
    boxes = [{"label": f"{int(r.stage_id)}" + (f".{int(r.stage_attempt)}" if r.stage_attempt else ""),
              "whislo": r.p5_ns, "q1": r.p25_ns, "med": r.p50_ns, "q3": r.p75_ns, "whishi": r.p95_ns,
              "mean": r.mean_ns, "fliers": []} for r in stats.itertuples()]
    fig, ax = _figure(3.6)
    positions = np.arange(len(boxes))
    colours = _stage_colours(stats["stage_id"])
    art = ax.bxp(boxes, positions=positions, widths=0.55, showmeans=True, patch_artist=True,
                 meanprops={"marker": "o", "markerfacecolor": "black", "markeredgecolor": "black", "markersize": 3},
                 medianprops={"color": "black"})
    for patch, stage_id in zip(art["boxes"], stats["stage_id"]):
        patch.set_facecolor(colours[int(stage_id)])
    ax.scatter(positions, stats["min_ns"], marker="_", color="#777777", s=40, zorder=3)
    ax.scatter(positions, stats["max_ns"], marker="_", color="#777777", s=40, zorder=3)
    index = {(r.stage_id, r.stage_attempt): i for i, r in enumerate(stats.itertuples())}
    drawn = data.stragglers[[(r.stage_id, r.stage_attempt) in index for r in data.stragglers.itertuples()]] \
        if not data.stragglers.empty else data.stragglers
    if not drawn.empty:
        x = np.array([index[(r.stage_id, r.stage_attempt)] for r in drawn.itertuples()], dtype=float)
        ax.scatter(x + 0.08, drawn["duration_ns"], color=FAILED, s=14, zorder=4, label="straggler")
        named = drawn.sort_values("ratio", ascending=False).groupby(["stage_id", "stage_attempt"]).head(
            STRAGGLERS_LABELLED)
        for r in named.itertuples():
            ax.annotate(f"p{int(r.partition)} · exec {r.executor_id}\n{r.ratio:.1f}x median",
                        (index[(r.stage_id, r.stage_attempt)] + 0.08, r.duration_ns), xytext=(6, 0),
                        textcoords="offset points", fontsize=7.5, va="center", color=FAILED,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _duration_axis(ax.yaxis, np.concatenate([stats["min_ns"], stats["max_ns"]]))
    top = max(stats["max_ns"].max(), drawn["duration_ns"].max() if not drawn.empty else 0.0)
    ax.set_ylim(top=top * (1.6 if ax.get_yscale() == "log" else 1.1))  # room for the stragglers' names
    ax.set_xlabel("stage")
    ax.set_ylabel("task duration")
    plot.svg = _render(fig, plot.key)
    return plot


# --- per-operator latency along the pipeline (paper Fig. 17) ----------------------------------------------------

def _no_pipeline_note(data: ReportData) -> str:
    from .data import trace_channels

    trace = trace_channels(data.channels)
    if not trace:
        return "No trace channels (cp_trace in SQL, cps.trace in Python): no pipeline to measure."
    if len(trace) == 1:
        return f"One trace channel ({trace[0]}): a latency needs two trace points on the same ids."
    return f"The trace channels ({', '.join(trace)}) share no tuple id: no latency to measure."


def _hop_label(row) -> str:
    return ("end to end\n" if row.hop == -1 else "") + f"{row.from_channel}\n-> {row.to_channel}"


@_styled
def pipeline(data: ReportData) -> Plot:
    plot = Plot("pipeline", "Latency along the pipeline, with error bounds",
                "Per hop between trace points: box 25th-75th percentile with the median, whiskers 5th-95th, dot "
                "mean, triangle p99, box width by tuple count. Beside each box: the distribution of the durations' "
                "error bounds (local and cross-host), on the same scale. " + SKETCH_NOTE)
    hops = hops_shown(data.pipeline) if not data.pipeline.empty else data.pipeline
    if hops.empty:
        plot.note = _no_pipeline_note(data)
        return plot
    most = max(int(hops["count"].max()), 1)
    boxes = [{"label": _hop_label(r), "whislo": r.p5_ns, "q1": r.p25_ns, "med": r.p50_ns, "q3": r.p75_ns,
              "whishi": r.p95_ns, "mean": r.mean_ns, "fliers": []} for r in hops.itertuples()]
    widths = [0.12 + 0.33 * (int(c) / most) ** 0.5 for c in hops["count"]]
    positions = np.arange(len(hops), dtype=float)
    fig, ax = _figure(4.2)
    art = ax.bxp(boxes, positions=positions, widths=widths, showmeans=True, patch_artist=True,
                 meanprops={"marker": "o", "markerfacecolor": "black", "markeredgecolor": "black", "markersize": 3},
                 medianprops={"color": "black"})
    for patch, remote in zip(art["boxes"], hops["remote_count"]):
        patch.set_facecolor(REMOTE_BOX if remote else LOCAL_BOX)
    ax.scatter(positions, hops["p99_ns"], marker="v", color="black", s=16, zorder=4, label="p99")
    errors = data.hop_errors
    tallest = max(float(errors["count"].max()), 1.0) if not errors.empty else 1.0
    for x, hop in zip(positions, hops.itertuples()):
        for remote, colour in ((False, LOCAL), (True, REMOTE)):
            part = of_hop(errors, hop)
            part = part[part["remote"] == remote] if not part.empty else part
            if not part.empty:  # a horizontal histogram, growing to the right of the box
                ax.barh(part["lo_ns"], 0.4 * part["count"] / tallest, height=part["hi_ns"] - part["lo_ns"],
                        left=x + 0.3, align="edge", color=colour, alpha=0.75, linewidth=0)
        bounds = of_hop(data.hop_bounds, hop)
        exact = int(bounds["exact"].sum()) if not bounds.empty else 0
        if exact:
            ax.annotate(f"{fmt.count(exact)} exact", (x + 0.3, 0), xycoords=("data", "axes fraction"),
                        xytext=(0, 3), textcoords="offset points", fontsize=7, color="#555555")
    drawn = [hops["p5_ns"], hops["p99_ns"]] + ([errors["lo_ns"], errors["hi_ns"]] if not errors.empty else [])
    _duration_axis(ax.yaxis, np.concatenate(drawn))
    ax.set_xlim(-0.6, len(hops) - 0.2)
    ax.set_ylabel("latency / error bound")
    from matplotlib.patches import Patch

    remote_boxes = hops["remote_count"] > 0
    kinds = set(errors["remote"]) if not errors.empty else set()
    legend = [(not remote_boxes.all(), Patch(color=LOCAL_BOX, label="latency, all on one host")),
              (remote_boxes.any(), Patch(color=REMOTE_BOX, label="latency, some cross-host")),
              (False in kinds, Patch(color=LOCAL, alpha=0.75, label="error bounds, one host")),
              (True in kinds, Patch(color=REMOTE, alpha=0.75, label="error bounds, cross-host"))]
    ax.legend(handles=[h for shown, h in legend if shown] + ax.get_legend_handles_labels()[0], loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    plot.svg = _render(fig, plot.key)
    return plot


# --- local vs remote latency densities (paper Fig. 18) ----------------------------------------------------------

@_styled
def densities(data: ReportData) -> Plot:
    plot = Plot("densities", "Local and cross-host latency densities",
                "Per hop, the share of its durations in each bin, bins equally wide on a log scale (a panel's bars, "
                "local and cross-host, add up to 100%), each panel's axis spanning the hop's durations: durations that "
                "start and end on one host (local) and those that cross hosts (remote).")
    histograms = data.latency_histograms
    if histograms.empty or data.pipeline.empty:
        plot.note = _no_pipeline_note(data)
        return plot
    hops = hops_shown(data.pipeline)
    if not histograms["remote"].any() or not histograms.loc[histograms["remote"], "count"].sum():
        plot.note = "Every traced duration started and ended on one host: no cross-host latency to compare."
    columns = min(3, len(hops))
    rows = -(-len(hops) // columns)
    # each panel its own axis: hops a thousand times apart would leave a narrow one a single sliver
    fig, axes = _figure(0.4 + 2.1 * rows, nrows=rows, ncols=columns, squeeze=False)
    for ax in axes.flat[len(hops):]:
        ax.set_visible(False)
    for ax, hop in zip(axes.flat, hops.itertuples()):
        ax.set_title(_hop_label(hop).replace("\n", " "), fontsize=9)
        part = of_hop(histograms, hop)
        part = part[part["count"] > 0] if not part.empty else part
        if part.empty:
            ax.text(0.5, 0.5, "no bounded duration", transform=ax.transAxes, ha="center", color="#555555")
            continue
        _density_panel(ax, part)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of durations")
    plot.svg = _render(fig, plot.key)
    return plot


def _density_panel(ax, part: pd.DataFrame) -> None:
    """One hop's bins (part: non-empty ones) as shares of its durations, the x axis from its lowest bin to its
    highest."""
    from matplotlib.ticker import FuncFormatter

    total = float(part["count"].sum())
    for remote, colour, name in ((False, LOCAL, "local"), (True, REMOTE, "remote")):
        group = part[part["remote"] == remote]
        if group["count"].sum():
            ax.bar(group["lo_ns"], group["count"] / total, width=group["hi_ns"] - group["lo_ns"], align="edge",
                   color=colour, alpha=0.6, linewidth=0, label=f"{name} ({fmt.count(group['count'].sum())})")
    low, high = float(part["lo_ns"].min()), float(part["hi_ns"].max())
    _duration_axis(ax.xaxis, [low, high])
    ax.set_xlim(low, high)
    ax.set_ylim(0, float(part["count"].max()) / total * 1.25)  # local and remote overlap; room for the legend
    # plain text: matplotlib's PercentFormatter escapes % as math text where usetex is set
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * 100:.3g}%"))
    ax.legend(loc="upper right", frameon=True, framealpha=0.85, edgecolor="none")


# --- throughput --------------------------------------------------------------------------------------------------

@_styled
def throughput(data: ReportData) -> Plot:
    period_s = data.throughput_period_ms / 1e3
    plot = Plot("throughput", "Throughput per channel",
                f"Records per second of each channel, counted over periods of {fmt.duration(period_s * 1e9)}.")
    rows = data.throughput
    if rows.empty or not rows["records"].sum():
        plot.note = "No records in any channel."
        return plot
    totals = rows.groupby("channel")["records"].sum().sort_values(ascending=False)
    shown = list(totals.index[:CHANNELS_DRAWN])
    if len(totals) > CHANNELS_DRAWN:
        plot.note = f"The {CHANNELS_DRAWN} busiest of {len(totals)} channels drawn."
    fig, ax = _figure(3.2)
    for channel in shown:
        part = rows[rows["channel"] == channel].sort_values("period_start_t_ns")
        ax.plot(part["period_start_t_ns"] / 1e9, part["records"] / period_s, drawstyle="steps-post", lw=1.3,
                label=channel)
    means = rows[rows["channel"].isin(shown)].groupby("channel")["records"].mean()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if means.max() > 50 * max(means.min(), 1e-9):
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    # plain numbers: matplotlib's default log labels are math text, which needs its math fonts
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:.2g}"))
    ax.set_xlabel("seconds since the application's start (reference clock)")
    ax.set_ylabel("records / s")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    plot.svg = _render(fig, plot.key)
    return plot


# --- calibration quality -----------------------------------------------------------------------------------------

def _pair_label(row) -> str:
    a, b = (row.host_a, row.host_b) if row.host_a != row.host_b else (row.domain_a, row.domain_b)
    return f"{a} -> {b}" if row.direction == "a->b" else f"{b} -> {a}"


@_styled
def calibration(data: ReportData) -> Plot:
    plot = Plot("calibration", "Calibration quality",
                "Per host pair and direction, each round's smallest round trip (MinRTT) and the error bound of the "
                "clock anchor it gives, over the application's time.")
    rows = data.calibration
    if rows.empty:
        domains = list(data.summary.get("domains") or [])
        plot.note = (f"One TSC domain ({domains[0] if domains else 'this host'}): every duration is measured on one "
                     "clock, nothing to calibrate." if len(domains) <= 1 else
                     f"No calibration rounds were recorded between the {len(domains)} TSC domains: cross-host "
                     "durations have no bound.")
        return plot
    rows = rows.assign(pair=[_pair_label(r) for r in rows.itertuples()]).sort_values("t_ns")
    fig, (rtt, bound) = _figure(3.0, ncols=2, sharex=True)
    for pair, part in rows.groupby("pair", sort=True):
        line, = rtt.plot(part["t_ns"] / 1e9, part["min_rtt_ns"], marker="o", ms=3, lw=1, label=pair)
        bound.plot(part["t_ns"] / 1e9, part["bound_ns"], marker="o", ms=3, lw=1, color=line.get_color())
    for ax, title in ((rtt, "MinRTT per round"), (bound, "anchor error bound per round")):
        ax.set_title(title)
        ax.set_xlabel("seconds since the application's start")
        ax.set_ylim(bottom=0)
        _duration_axis(ax.yaxis)
    bound.legend(*rtt.get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.0, 1.0))
    plot.svg = _render(fig, plot.key)
    return plot


# Each figure with the report's sections whose data it draws (data.py's CHAINS; the summary is there before any)
PLOTS = [(timeline, ("timeline",)), (stage_durations, ("stages", "stragglers")), (pipeline, ("channels", "pipeline")),
         (densities, ("pipeline",)), (throughput, ("throughput",)), (calibration, ("calibration",))]
