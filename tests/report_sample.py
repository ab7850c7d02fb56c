"""ReportData built by hand with known values: three hosts, four stages (one straggler of 11.8x, one failed and
retried attempt), a pipeline source -> join -> sink whose join -> sink hop makes 71% of the end-to-end p99,
cross-host bounds of 13 us, calibration rounds, throughput. `quiet()` is an application with nothing to report."""
from __future__ import annotations

import numpy as np
import pandas as pd

from cloudprofiler.analysis.report.data import ReportData

MS = 1e6
US = 1e3
HOSTS = {"1": "worker-a", "2": "worker-b", "3": "worker-a", "4": "worker-b"}
STRAGGLER = {"stage_id": 1, "partition": 7, "executor_id": "2", "host": "worker-b", "ratio": 11.8}


def _summary(**changes) -> dict:
    summary = {"app_id": "app-20261123101500-0001", "path": "/tmp/cloudprofiler-logs/app-20261123101500-0001",
               "hosts": ["hub", "worker-a", "worker-b"], "executors": 4,
               "domains": ["hub-boot", "worker-a-boot", "worker-b-boot"], "channels": 5, "records": 1_204_480,
               "dropped": 0, "files": 23, "cut_files": 0, "start_unix_ms": 1_795_428_900_000, "span_ns": 24e9,
               "reference_domain": "hub-boot", "tsc_hz": 2.1e9, "calibrated": True}
    summary.update(changes)
    return summary


def _tasks() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows, attempt_id = [], 0
    plan = [  # stage, job, partitions, start s, typical duration ns
        (0, 0, 16, 0.5, 400 * MS), (1, 0, 8, 3.0, 100 * MS), (2, 1, 24, 6.0, 900 * MS), (3, 2, 8, 16.0, 60 * MS)]
    for stage, job, partitions, start_s, typical in plan:
        clock = {e: start_s * 1e9 for e in HOSTS}
        for p in range(partitions):
            executor = min(clock, key=clock.get)
            duration = typical * (1.0 if stage == 1 else rng.lognormal(0, 0.15))
            attempts = [("FAILED", duration * 0.3), ("SUCCESS", duration)] if (stage, p) == (2, 5) else \
                [("SUCCESS", duration * 11.8 if (stage, p) == (1, 7) else duration)]
            if (stage, p) == (1, 7):
                executor = "2"
            for number, (status, d) in enumerate(attempts):
                begin = clock[executor]
                rows.append({"task_attempt_id": attempt_id, "job_id": job, "stage_id": stage, "stage_attempt": 0,
                             "partition": p, "attempt_number": number, "executor_id": executor,
                             "host": HOSTS[executor], "status": status,
                             "failure_reason": "ExceptionFailure(RuntimeError: lost a shuffle block)"
                             if status == "FAILED" else "",
                             "launch_time_ms": int(1_795_428_900_000 + begin / MS),
                             "finish_time_ms": int(1_795_428_900_000 + (begin + d) / MS),
                             "launch_t_ns": begin - 1 * MS, "finish_t_ns": begin + d + 1 * MS,
                             "start_t_ns": begin, "end_t_ns": begin + d, "duration_ns": d, "err_ns": 0.0,
                             "unbounded": False})
                clock[executor] = begin + d + 2 * MS
                attempt_id += 1
    return pd.DataFrame(rows)


STRAGGLER_COLUMNS = ["stage_id", "stage_attempt", "task_attempt_id", "partition", "executor_id", "host", "duration_ns",
                     "median_ns", "ratio"]


def _stage_frames(tasks: pd.DataFrame):
    ok = tasks[tasks["status"] == "SUCCESS"]
    stats, stages, stragglers = [], [], []
    previous_end = None
    for stage, part in ok.groupby("stage_id"):
        d = part["duration_ns"]
        median = d.median()
        slow = part[d > 1.5 * median]
        stats.append({"stage_id": stage, "stage_attempt": 0, "count": len(d), "min_ns": d.min(),
                      "p5_ns": d.quantile(0.05), "p25_ns": d.quantile(0.25), "p50_ns": median,
                      "p75_ns": d.quantile(0.75), "p95_ns": d.quantile(0.95), "max_ns": d.max(), "mean_ns": d.mean()})
        all_attempts = tasks[tasks["stage_id"] == stage]
        start, end = all_attempts["start_t_ns"].min(), all_attempts["end_t_ns"].max()
        stages.append({"stage_id": stage, "stage_attempt": 0, "job_id": int(part["job_id"].iloc[0]),
                       "tasks": len(all_attempts), "failed": int((all_attempts["status"] != "SUCCESS").sum()),
                       "p50_ns": median, "p90_ns": d.quantile(0.9), "p99_ns": d.quantile(0.99), "max_ns": d.max(),
                       "mean_ns": d.mean(), "skew": d.max() / median, "stragglers": len(slow), "start_t_ns": start,
                       "end_t_ns": end, "gap_before_ns": None if previous_end is None else start - previous_end,
                       **{m: float("nan") for m in ("input_records", "shuffle_read_records", "shuffle_write_bytes",
                                            "disk_spilled_bytes", "jvm_gc_time_ms", "executor_run_time_ms")}})
        previous_end = end
        for r in slow.itertuples():
            stragglers.append({"stage_id": stage, "stage_attempt": 0, "task_attempt_id": r.task_attempt_id,
                               "partition": r.partition, "executor_id": r.executor_id, "host": r.host,
                               "duration_ns": r.duration_ns, "median_ns": median, "ratio": r.duration_ns / median})
    return (pd.DataFrame(stats), pd.DataFrame(stages),
            pd.DataFrame(stragglers, columns=STRAGGLER_COLUMNS).sort_values("ratio", ascending=False,
                                                                             ignore_index=True))


HOPS = [  # hop, from, to, count, remote count, p50, p99 (ns), local bound, remote bound
    (-1, "source", "sink", 60_000, 40_000, 2.2 * MS, 11.4 * MS),
    (0, "source", "join", 60_000, 0, 0.9 * MS, 3.0 * MS),
    (1, "join", "sink", 60_000, 40_000, 1.1 * MS, 8.1 * MS),
]


def _pipeline() -> pd.DataFrame:
    rows = []
    for hop, a, b, count, remote, p50, p99 in HOPS:
        rows.append({"pipeline": 0, "hop": hop, "from_channel": a, "to_channel": b, "count": count,
                     "remote_count": remote,
                     "min_ns": p50 * 0.2, "p1_ns": p50 * 0.3, "p5_ns": p50 * 0.45, "p25_ns": p50 * 0.75,
                     "p50_ns": p50, "p75_ns": p50 * 1.4, "p95_ns": p99 * 0.6, "p99_ns": p99, "max_ns": p99 * 2.5,
                     "mean_ns": p50 * 1.2, "err_p50_ns": 13 * US if remote else 4.0,
                     "err_p99_ns": 16 * US if remote else 9.0, "err_max_ns": 21 * US if remote else 12.0,
                     "share_of_p99": p99 / HOPS[0][6]})
    return pd.DataFrame(rows)


def _log_bins(centre: float, sigma: float, total: int, bins: int, remote: bool) -> pd.DataFrame:
    edges = np.geomspace(centre / 30, centre * 30, bins + 1)
    weights = np.exp(-0.5 * ((np.log(edges[:-1] * edges[1:]) / 2 - np.log(centre)) / sigma) ** 2)
    counts = np.round(total * weights / weights.sum()).astype(int)
    return pd.DataFrame({"remote": remote, "bin": np.arange(bins), "lo_ns": edges[:-1], "hi_ns": edges[1:],
                         "count": counts})


def _hop_frames():
    bounds, errors, histograms = [], [], []
    for hop, a, b, count, remote, p50, p99 in HOPS:
        local = count - remote
        bounds.append({"hop": hop, "remote": False, "count": local, "exact": local // 3, "unbounded": 0,
                       "err_p50_ns": 4.0, "err_max_ns": 12.0})
        errors.append(_log_bins(4.0, 0.5, local - local // 3, 12, False)[["remote", "lo_ns", "hi_ns", "count"]]
                      .assign(hop=hop))
        histograms.append(_log_bins(p50 * 0.7, 0.6, local, 60, False).assign(hop=hop))
        if remote:
            bounds.append({"hop": hop, "remote": True, "count": remote, "exact": 0, "unbounded": 0,
                           "err_p50_ns": 13 * US, "err_max_ns": 21 * US})
            errors.append(_log_bins(13 * US, 0.15, remote, 12, True)[["remote", "lo_ns", "hi_ns", "count"]]
                          .assign(hop=hop))
            histograms.append(_log_bins(p50 * 1.3, 0.5, remote, 60, True).assign(hop=hop))
    return (pd.DataFrame(bounds).assign(pipeline=0), pd.concat(errors, ignore_index=True).assign(pipeline=0),
            pd.concat(histograms, ignore_index=True).assign(pipeline=0))


def _throughput(period_ms: int) -> pd.DataFrame:
    t = np.arange(0, 24e9, period_ms * MS)
    rng = np.random.default_rng(5)
    rows = []
    for channel, rate in (("source", 20_000), ("join", 20_000), ("sink", 19_000)):
        ramp = np.clip((t - 6e9) / 2e9, 0, 1) * np.clip((22e9 - t) / 1e9, 0, 1)
        rows.append(pd.DataFrame({"channel": channel, "period_start_t_ns": t,
                                  "records": (rate * period_ms / 1e3 * ramp * rng.uniform(0.9, 1.1, len(t)))
                                  .astype(int)}))
    return pd.concat(rows, ignore_index=True)


def _calibration() -> pd.DataFrame:
    rng = np.random.default_rng(9)
    rows = []
    pairs = [("hub-boot", "worker-a-boot", "hub", "worker-a", 15 * US), ("hub-boot", "worker-b-boot", "hub",
             "worker-b", 16 * US), ("worker-a-boot", "worker-b-boot", "worker-a", "worker-b", 18 * US)]
    for round_ in range(10):
        for a, b, host_a, host_b, rtt in pairs:
            for direction in ("a->b", "b->a"):
                min_rtt = rtt * rng.uniform(0.95, 1.15)
                rows.append({"domain_a": a, "domain_b": b, "direction": direction, "round": round_, "host_a": host_a,
                             "host_b": host_b, "probes": 100, "min_rtt_ns": min_rtt,
                             "bound_ns": min_rtt / 2 * rng.uniform(0.85, 1.0), "t_ns": (0.3 + 2.4 * round_) * 1e9})
    return pd.DataFrame(rows)


CHANNELS = pd.DataFrame({
    "channel": ["source", "join", "sink", "spark.task.start", "spark.task.end"],
    "handler": ["buffered"] * 5, "kind": ["records"] * 5, "files": [4, 4, 4, 4, 4],
    "records": [400_000, 400_000, 380_000, 12_240, 12_240], "hosts": [2, 2, 2, 2, 2]})

HEALTH_COLUMNS = ["kind", "severity", "subject", "count", "message"]


def sample(**summary_changes) -> ReportData:
    tasks = _tasks()
    stage_durations, stages, stragglers = _stage_frames(tasks)
    bounds, errors, histograms = _hop_frames()
    return ReportData(
        summary=_summary(**summary_changes), channels=CHANNELS, stages=stages, stage_durations=stage_durations,
        stragglers=stragglers, stragglers_total=len(stragglers), tasks=tasks, tasks_total=len(tasks),
        pipeline=_pipeline(), hop_bounds=bounds, hop_errors=errors, latency_histograms=histograms,
        throughput=_throughput(200), throughput_period_ms=200, calibration=_calibration(),
        health=pd.DataFrame(columns=HEALTH_COLUMNS))


def with_problems() -> ReportData:
    """The sample, plus 2,500 records dropped on the sink channel and a cut file."""
    data = sample(dropped=2_500, cut_files=1)
    data.health = pd.DataFrame([
        {"kind": "drops", "severity": "error", "subject": "sink", "count": 2_500,
         "message": "channel sink dropped 2,500 records"},
        {"kind": "cut_file", "severity": "warning", "subject": "worker-b-2/sink-41.arrows", "count": 1,
         "message": "worker-b-2/sink-41.arrows ends mid-batch: read up to its last complete batch"}])
    return data


def quiet() -> ReportData:
    """One host, one stage of eight equal tasks, no trace channel, no calibration: nothing to report."""
    tasks = _tasks()
    tasks = tasks[tasks["stage_id"] == 3].assign(host="laptop", executor_id="driver", duration_ns=60 * MS)
    stage_durations, stages, stragglers = _stage_frames(tasks)
    return ReportData(
        summary=_summary(hosts=["laptop"], domains=["laptop-boot"], executors=1, span_ns=1e9, calibrated=False,
                         channels=2),
        channels=CHANNELS[CHANNELS["channel"].str.startswith("spark.task.")], stages=stages,
        stage_durations=stage_durations, stragglers=stragglers, stragglers_total=0, tasks=tasks,
        tasks_total=len(tasks), throughput=_throughput(200)[lambda f: f["channel"] == "source"],
        health=pd.DataFrame(columns=HEALTH_COLUMNS))
