"""A Spark application folder with a known truth, for tests and benchmarks of the analysis.

`make_application(out, spec)` writes `<out>/<application id>/` in the layout and formats the plugin writes (README,
"Folder layout"): the task table, the calibration probes and the TSC domains as the driver writes them (their files
and columns as the plugin declares them: cloudprofiler.tables), and
one folder per executor, `<host>-<executor id>/<channel>.<host>.<pid>.<n>.arrows`. The log files are written by
the native library itself, in one process per executor (cloudprofiler.harness.synthetic_executor), each with its
host's name and its host's simulated TSC (CLOUDPROFILER_SIMULATE_TSC): every host is a TSC domain of its own,
related to this machine's TSC, the driver's and the reference, by a known offset and rate. The calibration probes
are synthesized from that relation: realistic round trips with jitter, the answering side's value read at a true
time inside the round trip, one round when the application starts, one after each job and a last run for each
executor at its end, as the plugin's coordinator does.

The application: `jobs` jobs, each a map stage (the pipeline's trace points before the shuffle, on contiguous
ranges of tuple ids) and a reduce stage (the points after it, each task taking every `partitions`-th id, so most
tuples cross executors and hosts), `partitions` tasks per stage spread over the executors, a known delay
distribution before each trace point of a stage, and one straggler. The truth, `<out>/<application id>.truth.arrows`
(outside the application folder): every record of every trace point and task channel with the true reference-domain
TSC at which it was read (columns channel, tuple_id, host, executor_id, domain, tsc, ref_tsc).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from .. import tables as plugin_tables
from ..clock import clock_read, tsc, tsc_frequency
from ..logs import RECORD_COLUMNS, log_files, log_metadata, read_log

DRIVER_HOST = "driver"
TASK_BATCH_ROWS = 4096  # as the plugin's task table (TaskListener.BATCH_ROWS)
PEERS = 8  # the plugin's default spark.cloudprofiler.calibration.peers

TRUTH_SCHEMA = pa.schema([
    ("channel", pa.string()), ("tuple_id", pa.int64()), ("host", pa.string()), ("executor_id", pa.string()),
    ("domain", pa.string()), ("tsc", pa.int64()), ("ref_tsc", pa.int64())])


@dataclass(frozen=True)
class HostClock:
    """A host's TSC as CLOUDPROFILER_SIMULATE_TSC makes it from this machine's: t + offset + floor(t * skew)."""

    offset: int  # ticks
    skew_ppm: float

    @property
    def env(self) -> str:
        return f"offset={self.offset},skew_ppm={self.skew_ppm}"

    @property
    def _ppt(self) -> int:
        return int(round(self.skew_ppm * 1e6))  # parts per 10^12, as the library rounds it

    def tsc(self, machine) -> np.ndarray:
        """The host's TSC at these ticks of this machine's TSC, exactly as the library computes it (int64)."""
        t = np.asarray(machine, dtype=np.int64)
        ppt = np.int64(self._ppt)
        # floor(t * ppt / 1e12) without overflowing int64: t = h2 1e12 + h1 1e6 + lo
        h2, m = np.divmod(t, np.int64(10**12))
        h1, lo = np.divmod(m, np.int64(10**6))
        qx, rx = np.divmod(h1 * ppt, np.int64(10**6))
        return t + self.offset + h2 * ppt + qx + (rx * np.int64(10**6) + lo * ppt) // np.int64(10**12)

    def machine(self, values) -> np.ndarray:
        """The latest tick of this machine's TSC at which the host's TSC read `values` (it reads the same value for
        at most two consecutive ticks while the skew is below 1e6 ppm)."""
        s = np.asarray(values, dtype=np.int64)
        t = np.floor((s - self.offset).astype(np.float64) / (1.0 + self._ppt / 1e12)).astype(np.int64)
        for _ in range(3):  # the slope is 1 + skew: each step shrinks the float estimate's error by the skew
            t = t + (s - self.tsc(t))
        for _ in range(4):
            above = self.tsc(t) > s
            below = self.tsc(t + 1) <= s
            if not (above.any() or below.any()):
                return t
            t = t - above + below
        raise ArithmeticError(f"could not invert the TSC simulation {self.env}")


REFERENCE_CLOCK = HostClock(0, 0.0)


def host_clocks(hosts: int, machine_tsc: int, hz: float) -> list[HostClock]:
    """Distinct clocks: hosts ahead of the driver by hours and hosts behind it (at most half this machine's TSC,
    which counts from boot: a host cannot have booted later than its TSC allows), skews of tens of ppm both ways."""
    clocks = []
    for i in range(hosts):
        step = i // 2 + 1
        offset = int(3 * 3600 * hz * step) if i % 2 == 0 else -int(machine_tsc // (2 * step))
        skew = (31.0, -44.0, 17.0, -23.0, 52.0, -9.0)[i % 6] + i // 6
        clocks.append(HostClock(offset, skew))
    return clocks


@dataclass(frozen=True)
class TracePoint:
    """A trace point of the pipeline: a chunk of tuples waits a lognormal delay (median, sigma) between the
    previous point of its stage and this one. The first point after the shuffle starts the reduce stage."""

    channel: str
    median_us: float = 0.0
    sigma: float = 0.0
    after_shuffle: bool = False


PIPELINE = (TracePoint("source"), TracePoint("parse", 20.0, 0.5), TracePoint("join", after_shuffle=True),
            TracePoint("sink", 50.0, 1.0))


@dataclass(frozen=True)
class Straggler:
    """A task of the last stage of job `job` that takes `delay_ms` longer than its peers, spread over its chunks
    (a slow node: its records come late too)."""

    job: int = 1
    partition: int = 1
    delay_ms: float = 500.0


@dataclass(frozen=True)
class SyntheticSpec:
    records: int = 200_000  # trace-point records in all (each tuple passes every point); task records come on top
    hosts: int = 2
    executors_per_host: int = 2
    jobs: int = 3
    partitions: int = 8  # tasks per stage
    pipeline: tuple = PIPELINE
    straggler: "Straggler | None" = field(default_factory=Straggler)
    counter: "str | None" = "ingest"  # an mpc channel counting the tuples of the first point; None: none
    chunk: int = 4096  # tuples per log_many call and per delay
    compression: str = "none"
    probes: int = 100  # per direction, pair and round
    one_way_us: float = 7.0  # smallest one-way network delay of a probe
    jitter_us: float = 3.0  # mean of the exponential jitter added to each leg
    seed: int = 1
    truth: bool = True

    def check(self) -> None:
        names = [p.channel for p in self.pipeline]
        for name, value, low in (("records", self.records, 1), ("hosts", self.hosts, 1),
                                 ("executors_per_host", self.executors_per_host, 1), ("jobs", self.jobs, 1),
                                 ("partitions", self.partitions, 1), ("chunk", self.chunk, 1),
                                 ("probes", self.probes, 2), ("trace points", len(names), 1)):
            if value < low:
                raise ValueError(f"{name}={value} must be at least {low}")
        if len(set(names)) != len(names) or {"spark.task.start", "spark.task.end", self.counter} & set(names):
            raise ValueError(f"trace point channels must be distinct and not a task or counter channel: {names}")
        if sum(p.after_shuffle for p in self.pipeline) > 1 or self.pipeline[0].after_shuffle:
            raise ValueError("at most one trace point starts the reduce stage, and not the first")
        if self.records < len(names) * self.jobs * self.partitions:
            raise ValueError(f"records={self.records} leaves some task without a tuple: at least "
                             f"{len(names) * self.jobs * self.partitions} needed")
        s = self.straggler
        if s is not None and not (0 <= s.job < self.jobs and 0 <= s.partition < self.partitions and s.delay_ms >= 0):
            raise ValueError(f"straggler {s} is not a partition of a job of this application (jobs={self.jobs}, "
                             f"partitions={self.partitions}) or has a negative delay")


@dataclass(frozen=True)
class SyntheticApplication:
    path: Path  # the application folder
    app_id: str
    truth_path: "Path | None"
    records: int  # trace-point records written (task and counter channels not counted)
    tasks: int
    straggler_task: "int | None"  # its task attempt id
    seconds: float  # time taken to make the folder


@dataclass
class _Executor:
    executor_id: str
    host: str
    domain: str
    clock: HostClock
    check: str
    process: "subprocess.Popen | None" = None
    stderr: object = None
    pid: int = 0

    def send(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self):
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.stderr.seek(0)
            raise RuntimeError(f"synthetic executor {self.executor_id} on {self.host} ended (exit code "
                               f"{self.process.returncode}): {self.stderr.read().decode(errors='replace')[-2000:]}")
        return json.loads(line)


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _new_app_id(out: Path) -> str:
    stamp = time.strftime("%Y%m%d%H%M%S")
    n = 0
    while (out / f"app-{stamp}-{n:04d}").exists() or (out / f"app-{stamp}-{n:04d}.truth.arrows").exists():
        n += 1
    return f"app-{stamp}-{n:04d}"


def _write_table(path: Path, schema: pa.Schema, batches: list[pa.RecordBatch], metadata: dict) -> None:
    """An Arrow IPC file, written aside and renamed into place, as the plugin publishes its tables."""
    schema = schema.with_metadata(metadata)
    fd, aside = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # O_EXCL, 0600
    with os.fdopen(fd, "wb") as sink, ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch.replace_schema_metadata(schema.metadata))
    os.rename(aside, path)


def _executors(spec: SyntheticSpec, boot: str, clocks: list[HostClock], hz: float) -> list[_Executor]:
    """The executors, host by host: the first of a host founds its TSC domain, the others join it (the text of
    their TSC check as the plugin records it)."""
    bound = f"+-{int(spec.one_way_us * hz / 1e6)} ({spec.probes} probes)"
    executors = []
    for h in range(spec.hosts):
        host, domain = f"worker-{h + 1}", f"{boot}#{h + 1}"
        now = tsc()
        differs = f"differs from {boot}: offset {int(clocks[h].tsc([now])[0]) - now} ticks beyond {bound}"
        for k in range(spec.executors_per_host):
            joins = f"agrees with {domain}: offset 0 ticks within {bound}"
            check = f"{differs}; founds a domain" if k == 0 else f"{differs}; {joins}"
            executors.append(_Executor(str(h * spec.executors_per_host + k), host, domain, clocks[h], check))
    return executors


def _start(executors: list[_Executor], spec: SyntheticSpec, app: Path, app_id: str) -> None:
    """One process per executor, each in a UTS namespace of its own (root, else an unprivileged user namespace)."""
    unshare = ["unshare", "--uts"] if os.geteuid() == 0 else ["unshare", "--uts", "--user", "--map-root-user"]
    points = [{"channel": p.channel, "median_us": p.median_us, "sigma": p.sigma} for p in spec.pipeline]
    for e in executors:
        settings = {"folder": str(app / f"{e.host}-{e.executor_id}"), "host": e.host, "executor_id": e.executor_id,
                    "app_id": app_id, "domain": e.domain, "check": e.check, "points": points,
                    "counter": spec.counter, "chunk": spec.chunk, "compression": spec.compression,
                    "seed": spec.seed * 1000 + int(e.executor_id)}
        e.stderr = tempfile.TemporaryFile()
        e.process = subprocess.Popen(
            [*unshare, sys.executable, "-m", "cloudprofiler.harness.synthetic_executor", json.dumps(settings)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=e.stderr, text=True,
            env={**os.environ, "CLOUDPROFILER_SIMULATE_TSC": e.clock.env})
    for e in executors:
        ready = e.answer()
        if ready["host"] != e.host:
            raise RuntimeError(f"synthetic executor {e.executor_id} runs on host {ready['host']!r}, not {e.host!r}")
        e.pid = ready["pid"]


def _stages(spec: SyntheticSpec) -> list[tuple[int, list[int], list[tuple[int, int, int]]]]:
    """Per stage: its job, the indexes of its trace points and each partition's ids as (first, stop, step)."""
    shuffle = next((i for i, p in enumerate(spec.pipeline) if p.after_shuffle), len(spec.pipeline))
    tuples = spec.records // len(spec.pipeline)
    stages = []
    for job in range(spec.jobs):
        lo, hi = job * tuples // spec.jobs, (job + 1) * tuples // spec.jobs
        p = spec.partitions
        stages.append((job, list(range(shuffle)),
                       [(lo + i * (hi - lo) // p, lo + (i + 1) * (hi - lo) // p, 1) for i in range(p)]))
        if shuffle < len(spec.pipeline):
            stages.append((job, list(range(shuffle, len(spec.pipeline))),
                           [(lo + (i - lo) % p, hi, p) for i in range(p)]))
    return stages


def _run_stages(spec: SyntheticSpec, executors: list[_Executor]) -> tuple[list[dict], list[int], "int | None"]:
    """Runs every stage on the executors (partition i on executor i mod n); returns the task table's rows, the
    machine TSC at the end of each job, and the straggler's task attempt id."""
    rows, job_ends, straggler_task, task_id = [], [], None, 0
    stages = _stages(spec)
    for stage_id, (job, points, partitions) in enumerate(stages):
        last_of_job = stage_id + 1 == len(stages) or stages[stage_id + 1][0] != job
        per_executor: list[list[dict]] = [[] for _ in executors]
        for partition, (first, stop, step) in enumerate(partitions):
            slow = spec.straggler is not None and last_of_job and (job, partition) == (
                spec.straggler.job, spec.straggler.partition)
            straggler_task = task_id if slow else straggler_task
            per_executor[partition % len(executors)].append(
                {"id": task_id, "first": first, "stop": stop, "step": step, "points": points,
                 "counts": points[0] == 0, "delay_ms": spec.straggler.delay_ms if slow else 0.0,
                 "partition": partition})
            task_id += 1
        for e, tasks in zip(executors, per_executor):
            e.send(json.dumps(tasks))
        for e, tasks in zip(executors, per_executor):
            for task, done in zip(tasks, e.answer()):
                rows.append({"task_attempt_id": task["id"], "job_id": job, "stage_id": stage_id, "stage_attempt": 0,
                             "partition": task["partition"], "attempt_number": 0, "executor_id": e.executor_id,
                             "host": e.host, "launch_time_ms": done["launch_ms"], "finish_time_ms": done["finish_ms"],
                             "status": "SUCCESS", "failure_reason": ""})
        if last_of_job:
            job_ends.append(tsc())
    rows.sort(key=lambda r: r["task_attempt_id"])
    return rows, job_ends, straggler_task


def _host_pairs(n: int, peers: int = PEERS) -> list[tuple[int, int]]:
    """The coordinator's pairs among n non-reference domains (CalibrationCoordinator.hostPairs)."""
    if peers == 0:
        return []
    if n - 1 <= peers:
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    out: list[tuple[int, int]] = []
    for i in range(n):
        for step in range(1, max(1, peers // 2) + 1):
            pair = tuple(sorted((i, (i + step) % n)))
            if pair not in out:
                out.append(pair)
    return out


class _Prober:
    """Probe runs of known truth: each leg takes one_way + exponential jitter (now and then a long tail), the
    answer is read at a true time inside the round trip."""

    def __init__(self, spec: SyntheticSpec, hz: float):
        self.rng = np.random.default_rng(spec.seed)
        self.count, self.tick = spec.probes, hz / 1e6
        self.one_way, self.jitter = spec.one_way_us, spec.jitter_us

    def run(self, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(send, remote, recv) in machine ticks of a run that begins at `start`."""
        n, rng = self.count, self.rng
        legs = self.one_way + rng.exponential(self.jitter, (2, n)) + (rng.random((2, n)) < 0.03) * rng.exponential(
            50.0, (2, n))
        answer = rng.uniform(0.2, 1.0, n)  # the responder reads its TSC this long after the probe arrives
        gap = 2.0  # the prober's own time between an answer and the next probe
        span = legs[0] + answer + legs[1] + gap
        send = start + np.round(np.concatenate([[0.0], np.cumsum(span[:-1])]) * self.tick).astype(np.int64)
        remote = send + np.round((legs[0] + answer / 2) * self.tick).astype(np.int64)
        recv = send + np.round((legs[0] + answer + legs[1]) * self.tick).astype(np.int64)
        return send, remote, recv


def _round(prober: _Prober, start: int, pairs: list[tuple]) -> tuple[list[tuple], int]:
    """One round's runs from machine tick `start`: for each pair (domain a, host a, clock a, domain b, host b,
    clock b) a run a -> b, then b -> a, one after the other; returns the runs (pair, direction, send, remote, recv
    in machine ticks) and the tick at which the round ends."""
    runs, at = [], start
    for pair in pairs:
        for direction in ("a->b", "b->a"):
            send, remote, recv = prober.run(at)
            at = int(recv[-1]) + int(20 * prober.tick)
            runs.append((pair, direction, send, remote, recv))
    return runs, at


def _probes(number: int, runs: list[tuple], shift: int = 0) -> pa.RecordBatch:
    """The round's calibration probes: each run's TSCs read by the clock of the side that read them, its times moved
    by `shift` machine ticks."""
    schema = plugin_tables.table("calibration").schema
    columns: dict[str, list] = {name: [] for name in schema.names}
    for (da, ha, ca, db, hb, cb), direction, send, remote, recv in runs:
        initiator, answerer = (ca, cb) if direction == "a->b" else (cb, ca)
        for name, value in (("domain_a", da), ("domain_b", db), ("direction", direction), ("host_a", ha),
                            ("host_b", hb)):
            columns[name].append(np.full(send.size, value, dtype=object))
        columns["round"].append(np.full(send.size, number, dtype=np.int32))
        columns["send_tsc"].append(initiator.tsc(send + shift))
        columns["remote_tsc"].append(answerer.tsc(remote + shift))
        columns["recv_tsc"].append(initiator.tsc(recv + shift))
    arrays = [pa.array(np.concatenate(columns[f.name]), f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _calibration(spec: SyntheticSpec, hz: float, boot: str, executors: list[_Executor], begin: int,
                 job_ends: list[int], end: int) -> list[pa.RecordBatch]:
    """The coordinator's rounds: one as the domains appear (ending a millisecond before the first record), one
    after each job, then a last run between the driver and each executor as it stops."""
    prober = _Prober(spec, hz)
    margin = int(1000 * prober.tick)
    representatives = list({e.domain: e for e in executors}.values())
    reference = (boot, DRIVER_HOST, REFERENCE_CLOCK)
    sides = [(e.domain, e.host, e.clock) for e in representatives]
    pairs = [(*reference, *s) for s in sides] + [(*sides[i], *sides[j]) for i, j in _host_pairs(len(sides))]
    runs, length = _round(prober, 0, pairs)
    batches = [_probes(1, runs, begin - margin - length)]
    for job_end in job_ends:
        batches.append(_probes(len(batches) + 1, _round(prober, job_end + margin, pairs)[0]))
    at = end + margin
    for e in executors:
        runs, at = _round(prober, at, [(*reference, e.domain, e.host, e.clock)])
        batches.append(_probes(len(batches) + 1, runs))
    return batches


def _domains(boot: str, executors: list[_Executor]) -> pa.RecordBatch:
    rows = [(boot, boot, "reference", DRIVER_HOST, "driver", os.getpid(), 40000, 0, "reference")]
    seen = set()
    for i, e in enumerate(executors):
        role = "member" if e.domain in seen else "representative"
        seen.add(e.domain)
        rows.append((e.domain, boot, role, e.host, e.executor_id, e.pid, 40001 + i, 41001 + i, e.check))
    schema = plugin_tables.table("tsc_domains").schema
    return pa.RecordBatch.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def _truth(app: Path, executors: list[_Executor]) -> pa.Table:
    """Every record of every record channel with the machine TSC (= the reference domain's) at which it was read."""
    of_pid = {e.pid: e for e in executors}
    tables = []
    for path in log_files(app):
        table = read_log(path)
        if tuple(table.column_names) != RECORD_COLUMNS:
            continue
        e = of_pid[log_metadata(table)["pid"]]
        values = table.column("tsc").to_numpy().astype(np.int64)
        n = table.num_rows
        tables.append(pa.table([
            pa.array([log_metadata(table)["channel.name"]] * n, pa.string()), table.column("tuple_id").cast(pa.int64()),
            pa.array([e.host] * n, pa.string()), pa.array([e.executor_id] * n, pa.string()),
            pa.array([e.domain] * n, pa.string()), pa.array(values), pa.array(e.clock.machine(values))],
            schema=TRUTH_SCHEMA))
    return pa.concat_tables(tables)


def make_application(out: "str | Path", spec: SyntheticSpec = SyntheticSpec()) -> SyntheticApplication:
    """Writes a synthetic application folder under `out` (created if missing) and, with spec.truth, its truth."""
    spec.check()
    if os.environ.get("CLOUDPROFILER_SIMULATE_TSC"):
        raise RuntimeError("the synthetic application's reference is this machine's own TSC: unset "
                           f"CLOUDPROFILER_SIMULATE_TSC={os.environ['CLOUDPROFILER_SIMULATE_TSC']}")
    began = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    app_id = _new_app_id(out)
    app = Path(plugin_tables.app_folder(str(out), app_id))
    app.mkdir()
    hz, boot, start = tsc_frequency().hz, _boot_id(), clock_read()
    executors = _executors(spec, boot, host_clocks(spec.hosts, tsc(), hz), hz)
    try:
        _start(executors, spec, app, app_id)
        first = tsc()
        rows, job_ends, straggler_task = _run_stages(spec, executors)
        for e in executors:
            e.send("stop")
        for e in executors:
            e.answer()
            e.process.wait(timeout=60)
        last = tsc()
    finally:
        for e in executors:
            if e.process is not None and e.process.poll() is None:
                e.process.kill()
                e.process.wait()
            if e.stderr is not None:
                e.stderr.close()
    task_table, domain_table, probe_table = (plugin_tables.table(t) for t in ("tasks", "tsc_domains", "calibration"))
    # the columns beyond a task's identity and times (Spark's metrics, the job's properties) are null here
    tasks = [pa.RecordBatch.from_pylist(rows[i:i + TASK_BATCH_ROWS], schema=task_table.schema)
             for i in range(0, len(rows), TASK_BATCH_ROWS)]
    start_clock = {"tsc": start.tsc, "monotonic_raw_ns": start.monotonic_raw_ns, "realtime_ns": start.realtime_ns,
                   "uncertainty_ticks": start.uncertainty_ticks}
    _write_table(app / task_table.file, task_table.schema, tasks,
                 {"application.start.clock": json.dumps(start_clock), "tsc.hz": repr(hz), "tsc.domain": boot})
    _write_table(app / domain_table.file, domain_table.schema, [_domains(boot, executors)],
                 {"reference.domain": boot})
    _write_table(app / probe_table.file, probe_table.schema,
                 _calibration(spec, hz, boot, executors, first, job_ends, last),
                 {"reference.domain": boot, "probes.per_run": str(spec.probes)})
    records = spec.records // len(spec.pipeline) * len(spec.pipeline)
    truth_path = None
    if spec.truth:
        truth_path = out / f"{app_id}.truth.arrows"
        about = {"spec": json.dumps(asdict(spec)), "reference.domain": boot, "tsc.hz": repr(hz),
                 "straggler.task_attempt_id": str(straggler_task),
                 "clocks": json.dumps({e.domain: asdict(e.clock) for e in executors})}
        truth = _truth(app, executors)
        _write_table(truth_path, TRUTH_SCHEMA, truth.to_batches(max_chunksize=1 << 20), about)
    return SyntheticApplication(app, app_id, truth_path, records, len(rows), straggler_task,
                                time.monotonic() - began)
