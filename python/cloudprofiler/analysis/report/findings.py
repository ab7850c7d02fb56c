"""Findings in plain words, computed from ReportData, most important first.

Order: first what makes other numbers wrong or incomplete (lost records, cut files; severity "error"), then where
the time goes (stragglers, the hop that dominates the tail, failures; "warning"), then how far the numbers can be
trusted and other context ("info"). Within a severity, the larger `weight` first: the share of the application's
span, of the end-to-end p99 or of the records concerned.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from ..stages import STRAGGLER_RATIO
from . import format as fmt
from . import queries as queries_module
from . import streaming as streaming_section
from .stragglers import causes
from . import udfs as udfs_section
from .data import ReportData

SEVERITIES = ("error", "warning", "info")
STAGES_NAMED = 3  # stages whose worst straggler gets its own line
TIME_LOST_NOTABLE = 0.01  # a straggler is a warning when it costs this share of the span (or STRAGGLER_NOTABLE x)
STRAGGLER_NOTABLE = 3.0
UNCERTAIN = 0.10  # "durations under 10 x the bound are uncertain by more than 10%"
GAP_NOTABLE = 0.10  # a gap between stages worth a line: this share of the span...
GAP_MIN_NS = 100e6  # ...and at least 100 ms
HOP_DOMINANT = 0.5  # a hop with this share of the end-to-end p99 is a warning
OPERATOR_DOMINANT = 0.5  # an operator with this share of its query's task time is a warning
OPERATOR_NAMED = 0.05  # ...and one under this share of it gets no line
ROW_HOP_DOMINANT = 0.8  # a hop with this share of the medians of a query's operator hops gets a line...
ROW_HOP_MIN_NS = 10e3  # ...if its median is at least 10 us (an operator's own work on a row is ns to a few us)
ROW_HOP_WEIGHT = OPERATOR_NAMED  # ...and its rows' time in it (mean x rows) is this share of the query's task time
SKEW_NAMED = STRAGGLER_RATIO  # the slowest task of an operator over this x its median is named, with its partition
HEALTH_COMPUTED_HERE = {"drops", "cut_file"}  # health kinds the findings below word themselves (and "unbounded"
# where there are traced durations: `_unbounded` counts those, health counts records)


@dataclass(frozen=True)
class Finding:
    severity: str  # one of SEVERITIES
    weight: float  # order within a severity, larger first
    text: str
    kind: str


def findings(data: ReportData) -> list[Finding]:
    found = [f for rule in RULES for f in rule(data)]
    if not any(f.severity in ("error", "warning") for f in found):
        found.append(_nothing_stands_out(data))
    return sorted(found, key=lambda f: (SEVERITIES.index(f.severity), -f.weight))


def _span(data: ReportData) -> float:
    return float(data.summary.get("span_ns") or 0.0)


def _health(data: ReportData, kind: str) -> pd.DataFrame:
    if data.health.empty:
        return data.health
    return data.health[data.health["kind"] == kind]


def _names(values, shown: int = 3) -> str:
    values = [str(v) for v in values]
    text = ", ".join(values[:shown])
    return text + (f" and {len(values) - shown} more" if len(values) > shown else "")


def _drops(data: ReportData) -> list[Finding]:
    rows = _health(data, "drops")
    dropped = int(rows["count"].sum()) if not rows.empty else 0
    if not dropped:
        return []
    logged = int(data.summary.get("records") or 0)
    share = dropped / (logged + dropped)
    return [Finding("error", share, f"{fmt.count(dropped)} records were dropped ({fmt.percent(share)} of those "
                    f"logged; full buffers) in channel{'s' * (len(rows) > 1)} {_names(rows['subject'])}: counts and "
                    "latencies there miss them",
                    "drops")]


def _cut_files(data: ReportData) -> list[Finding]:
    rows = _health(data, "cut_file")
    if rows.empty:
        return []
    files = int(data.summary.get("files") or len(rows))
    cut = int(rows["count"].sum())
    return [Finding("error", cut / max(files, 1), f"{cut} of {files} log files end mid-batch (their process died "
                    f"before closing them); read up to their last complete batch: {_names(rows['subject'], 2)}",
                    "cut_file")]


def _other_health(data: ReportData) -> list[Finding]:
    if data.health.empty:
        return []
    found = []
    for kind, rows in data.health.groupby("kind", sort=False):
        computed = kind in HEALTH_COMPUTED_HERE or (kind == "unbounded" and not data.hop_bounds.empty)
        if computed or not set(rows["severity"]) & {"error", "warning"}:
            continue
        worst = min(rows["severity"], key=SEVERITIES.index)
        text = str(rows["message"].iloc[0]) + (f" (and {len(rows) - 1} more like it)" if len(rows) > 1 else "")
        found.append(Finding(worst, float(rows["count"].sum()) / max(int(data.summary.get("records") or 1), 1),
                             text, str(kind)))
    return found


def _stragglers(data: ReportData) -> list[Finding]:
    if data.stragglers.empty:
        return []
    span = _span(data)
    worst = (data.stragglers.sort_values("ratio", ascending=False)
             .drop_duplicates(["stage_id", "stage_attempt"]))
    worst = worst.assign(lost=(worst["duration_ns"] - worst["median_ns"]) / span if span else 0.0)
    worst = worst.sort_values("lost", ascending=False)
    per_stage = {} if data.stages.empty else {
        (r.stage_id, r.stage_attempt): int(r.stragglers) for r in data.stages.itertuples()}
    found = []
    for row in worst.head(STAGES_NAMED).itertuples():
        more = per_stage.get((row.stage_id, row.stage_attempt), 1) - 1
        notable = row.lost >= TIME_LOST_NOTABLE or row.ratio >= STRAGGLER_NOTABLE
        found.append(Finding(
            "warning" if notable else "info", float(row.lost),
            f"{fmt.stage(row.stage_id, row.stage_attempt)}: partition {int(row.partition)} took {row.ratio:.1f}x "
            f"the median ({fmt.duration(row.duration_ns)} against {fmt.duration(row.median_ns)}; "
            f"{fmt.executor(row.executor_id, row.host)})" + _why(row)
            + (f"; {more} more straggler{'s' * (more > 1)} in this stage" if more > 0 else ""), "straggler"))
    if len(worst) > STAGES_NAMED:
        more = len(worst) - STAGES_NAMED
        found.append(Finding("info", 0.0, f"{more} more stage{'s have' if more > 1 else ' has'} stragglers "
                             "(the stage table counts them)", "straggler"))
    return found


def _why(row) -> str:
    found = causes(row)
    return ": " + ", ".join(found) if found else ""


def _failures(data: ReportData) -> list[Finding]:
    if data.stages.empty or not int(data.stages["failed"].sum()):
        return []
    failed = int(data.stages["failed"].sum())
    text = f"{failed} task attempt{'s' if failed > 1 else ''} failed"
    tasks = data.tasks
    if not tasks.empty:
        first = tasks[tasks["status"] != "SUCCESS"].sort_values("launch_time_ms").head(1)
        for row in first.itertuples():
            reason = _reason(str(row.failure_reason or ""))
            text += (f"; the first: {fmt.stage(row.stage_id, row.stage_attempt)}, partition {int(row.partition)} on "
                     f"{fmt.executor(row.executor_id, row.host)}" + (f": {reason}" if reason else ""))
        retried = int((tasks["attempt_number"] > 0).sum())
        if retried:
            text += f"; {retried} attempt{'s' if retried > 1 else ''} retried a partition"
    return [Finding("warning", failed / max(int(data.stages["tasks"].sum()), 1), text, "failure")]


def _reason(failure: str, limit: int = 120) -> str:
    """The line that says what went wrong: a Python traceback's last line ('RuntimeError: ...') where Spark
    wrapped one, else the start of Spark's text."""
    raised = re.findall(r"^[A-Za-z_][\w.]*(?:Error|Exception): .*$", failure, re.MULTILINE)
    text = raised[0] if raised else " ".join(failure.split())
    return text[:limit] + ("..." if len(text) > limit else "")


def _hops(data: ReportData) -> list[Finding]:
    """Per pipeline: the hop with the largest share of its end-to-end p99, or a single hop's figures."""
    found = []
    for _, rows in data.pipeline.groupby("pipeline", sort=True) if not data.pipeline.empty else []:
        hops, end_to_end = rows[rows["hop"] >= 0], rows[(rows["hop"] == -1) & (rows["count"] > 0)]
        if len(hops) == 1 or end_to_end.empty:
            for row in hops[hops["count"] > 0].itertuples():
                found.append(Finding("info", 0.0, f"{fmt.hop(row.from_channel, row.to_channel)}: p50 "
                                     f"{fmt.duration(row.p50_ns)}, p99 {fmt.duration(row.p99_ns)} over "
                                     f"{fmt.count(row.count)} tuples", "hop"))
            continue
        top = hops.sort_values("share_of_p99", ascending=False).iloc[0]
        total = end_to_end.iloc[0]
        share = fmt.number(top.share_of_p99)
        if share is None:  # no hop paired a tuple yet (a running application's first files), or a p99 of 0
            continue
        found.append(Finding("warning" if share >= HOP_DOMINANT else "info", share,
                             f"{fmt.hop(top.from_channel, top.to_channel)} adds {fmt.percent(share)} of the end-to-end "
                             f"p99 ({fmt.duration(top.p99_ns)} of {fmt.duration(total.p99_ns)}, "
                             f"{fmt.hop(total.from_channel, total.to_channel)})", "hop"))
    return found


def _bounds(data: ReportData) -> list[Finding]:
    """How tight cross-host durations are, and which durations that makes uncertain."""
    remote = data.hop_bounds[data.hop_bounds["remote"] & data.hop_bounds["err_p50_ns"].notna()] \
        if not data.hop_bounds.empty else data.hop_bounds
    if not remote.empty and remote["count"].sum() > remote["unbounded"].sum():
        bound = _weighted_median(remote["err_p50_ns"], remote["count"] - remote["unbounded"])
        threshold = bound / UNCERTAIN
        counted = int((remote["count"] - remote["unbounded"]).sum())
        text = (f"cross-host bounds are {fmt.duration(bound)} (median over {fmt.count(counted)} durations between "
                f"hosts, largest {fmt.duration(remote['err_max_ns'].max())}): durations under "
                f"{fmt.duration(threshold)} are uncertain by more than {fmt.percent(UNCERTAIN)}")
        under = _share_under(data.latency_histograms, threshold)
        if under is not None and under > 0:
            text += f"; {fmt.percent(under)} of the cross-host latencies measured here are"
        return [Finding("warning" if under and under >= 0.5 else "info", under or 0.0, text, "bound")]
    calibration = data.calibration
    if calibration.empty or "bound_ns" not in calibration:
        return []
    pairs = calibration[calibration["bound_ns"].notna() & calibration.get("used", True)]
    if pairs.empty:
        return []
    bound = float(pairs["bound_ns"].median())
    domains = len(set(pairs["domain_a"]) | set(pairs["domain_b"]))
    return [Finding("info", 0.0, f"the clocks of {domains} TSC domains are calibrated within {fmt.duration(bound)} "
                    f"(median over the {len(pairs)} rounds translation uses): a duration from one to another under "
                    f"{fmt.duration(2 * bound / UNCERTAIN)} would be uncertain by more than {fmt.percent(UNCERTAIN)}",
                    "bound")]


def _weighted_median(values: pd.Series, weights: pd.Series) -> float:
    order = values.to_numpy().argsort()
    v, w = values.to_numpy()[order], weights.to_numpy()[order]
    return float(v[(w.cumsum() >= w.sum() / 2).argmax()])


def _share_under(histograms: pd.DataFrame, threshold_ns: float):
    """Share of the cross-host latencies below threshold_ns (bins straddling it counted by their log overlap)."""
    if histograms.empty:
        return None
    remote = histograms[histograms["remote"] & (histograms["hop"] >= 0)]
    if remote.empty or not remote["count"].sum():
        return None
    import numpy as np

    lo, hi = np.log(remote["lo_ns"].clip(lower=1e-3)), np.log(remote["hi_ns"].clip(lower=1e-3))
    part = ((np.log(threshold_ns) - lo) / (hi - lo).where(hi > lo, 1.0)).clip(0.0, 1.0)
    return float((remote["count"] * part).sum() / remote["count"].sum())


def _unbounded(data: ReportData) -> list[Finding]:
    if data.hop_bounds.empty:
        return []
    hops = data.hop_bounds[data.hop_bounds["hop"] >= 0]
    unbounded, total = int(hops["unbounded"].sum()), int(hops["count"].sum())
    if not unbounded:
        return []
    return [Finding("warning", unbounded / total, f"{fmt.count(unbounded)} of {fmt.count(total)} traced durations "
                    f"({fmt.percent(unbounded / total)}) have no error bound: no calibration relates their hosts' "
                    "clocks, so they are shown without one", "unbounded")]


def _stage_time(data: ReportData) -> list[Finding]:
    span = _span(data)
    if data.stages.empty or not span or len(data.stages) < 2:
        return []
    length = data.stages["end_t_ns"] - data.stages["start_t_ns"]
    row = data.stages.loc[length.idxmax()]
    share = float(length.max() / span)
    return [Finding("info", share, f"{fmt.stage(row.stage_id, row.stage_attempt)} ran for {fmt.percent(share)} of "
                    f"the application's span ({fmt.duration(length.max())} of {fmt.duration(span)}, "
                    f"{fmt.count(row.tasks)} tasks)", "stage_time")]


def _gaps(data: ReportData) -> list[Finding]:
    span = _span(data)
    if data.stages.empty or not span or data.stages["gap_before_ns"].isna().all():
        return []
    row = data.stages.loc[data.stages["gap_before_ns"].idxmax()]
    share = float(row.gap_before_ns / span)
    if share < GAP_NOTABLE or row.gap_before_ns < GAP_MIN_NS:
        return []
    return [Finding("info", share, f"{fmt.stage(row.stage_id, row.stage_attempt)} started "
                    f"{fmt.duration(row.gap_before_ns)} after the stage before it ended ({fmt.percent(share)} of "
                    "the span with no stage running: driver-side work or an idle cluster)", "gap")]


def _operators(data: ReportData) -> list[Finding]:
    """Per query shown in the Queries section: the operator with the largest share of its task time (own time),
    and where that operator is skewed, the partition where it took longest and how its rows compare."""
    if data.operators.empty:
        return []
    found = []
    for query in data.queries[data.queries["shown"]].itertuples():
        rows = data.operators[(data.operators["sql_execution_id"] == query.sql_execution_id)
                              & data.operators["share"].notna()]
        if rows.empty:
            continue
        top = next(rows.sort_values(["share", "probe_id"], ascending=[False, True]).itertuples())
        share = float(top.share)
        if share < OPERATOR_NAMED:
            continue
        name = queries_module.operator_name(top.operator, top.probe_id)
        text = (f"query ({queries_module.query_title(query)}): {name} takes "
                f"{fmt.percent(share)} of the query's task time ({fmt.duration(top.exclusive_s * 1e9)} of "
                f"{fmt.duration(query.query_task_s * 1e9)})")
        if top.tasks >= 2 and top.skew == top.skew and top.skew >= SKEW_NAMED and top.exclusive_s > 0:
            text += (f"; {fmt.percent(top.max_exclusive_s / top.exclusive_s)} of it in partition "
                     f"{int(top.max_partition)}")
            ratio = queries_module.row_ratio(top)
            if ratio and ratio[0] >= SKEW_NAMED:
                text += f", which {ratio[1]} {queries_module.times(ratio[0])} the median rows"
            else:
                text += f" ({top.skew:.1f}x the median task's own time)"
        found.append(Finding("warning" if share >= OPERATOR_DOMINANT else "info", share, text, "operator"))
    return found


def _row_hops(data: ReportData) -> list[Finding]:
    """Per query shown: the hop between operators where its sampled rows spend most of their time, where one
    dominates (ROW_HOP_DOMINANT of the sum of the query's hops' medians, ROW_HOP_MIN_NS or more, and its rows' time
    in it ROW_HOP_WEIGHT of the query's task time), e.g. a Python UDF's, whose rows wait for their batch and the
    worker."""
    if data.operator_hops.empty or data.operators.empty:
        return []
    task_ns = dict(zip(data.queries["sql_execution_id"], data.queries["query_task_s"] * 1e9))
    # the hops are the shown queries' operators' (_operator_hops)
    titles = {int(query.sql_execution_id): queries_module.query_title(query) for query in data.queries.itertuples()}
    rows_out = dict(zip(data.operators["probe_id"], data.operators["rows"]))
    found = []
    for execution, hops in data.operator_hops.groupby("sql_execution_id"):
        hops = hops[hops["rows"] > 0]
        total = float(hops["p50_ns"].sum())
        if len(hops) < 2 or not total > 0:
            continue
        top = next(hops.sort_values(["p50_ns", "from_probe_id"], ascending=[False, True]).itertuples())
        share = float(top.p50_ns) / total
        if share < ROW_HOP_DOMINANT or top.p50_ns < ROW_HOP_MIN_NS:
            continue
        # a hop of 30 us on the 5 rows of a broadcast's build side dominates its query's hops and matters nothing
        # to a query of seconds: weigh it by every row that crossed it (its mean over the sample, x the rows its
        # operator produced) against the query's task time
        if not top.mean_ns * rows_out.get(top.to_probe_id, 0) >= ROW_HOP_WEIGHT * task_ns.get(execution, math.inf):
            continue
        found.append(Finding("info", share, (
            f"query ({titles[int(execution)]}): its sampled rows spend {fmt.percent(share)} of their time "
            f"between operators from {queries_module.operator_name(top.from_operator, top.from_probe_id)} to "
            f"{queries_module.operator_name(top.to_operator, top.to_probe_id)}: "
            f"{queries_module.row_latency(hops[hops['to_probe_id'] == top.to_probe_id])}, against "
            f"{fmt.duration(total - top.p50_ns)} in the medians of the query's {len(hops) - 1} other "
            f"hop{'s' * (len(hops) > 2)}"), "row_hop"))
    return found


def _nothing_stands_out(data: ReportData) -> Finding:
    stages = len(data.stages)
    attempts = int(data.stages["tasks"].sum()) if stages else data.tasks_total
    return Finding("info", float("inf"), f"Nothing stands out: {stages} stage{'s' * (stages != 1)}, "
                   f"{fmt.count(attempts)} task attempts, no failed attempt, no notable straggler, no record "
                   "lost, no dominant hop", "none")


RULES = [_drops, _cut_files, _other_health, _stragglers, _failures, _hops, _operators, _row_hops, _unbounded,
         _bounds, _stage_time, _gaps]
RULES.append(lambda data: udfs_section.findings(data, Finding))  # the Python UDFs section's
RULES.append(lambda data: streaming_section.findings(data, Finding))  # the streaming section's
