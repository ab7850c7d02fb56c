"""Calibration inside Spark across hosts: a hub and two worker hosts in network namespaces joined by veth links
and a bridge, a real standalone master and workers, the driver in the hub. Each worker host runs its executors
as a TSC domain of its own (a simulated TSC: hours apart, tens of ppm apart); all namespaces share one physical
TSC, so the truth of every duration is known to the tick. A job traces every tuple before and after a shuffle;
each cross-host duration, translated into the driver's domain, must hold its truth inside its bound. Then the
calibration traffic between the two workers is cut (durations route through the driver), and then every
calibration packet to one worker is dropped (its durations come out flagged)."""
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
from cloudprofiler.calibration.spark import durations_in_reference, load_calibrations, load_domains
from cloudprofiler.harness.hosts import Hosts, namespaces_available
from cloudprofiler.harness.standalone import standalone_cluster

pytestmark = pytest.mark.skipif(not namespaces_available() or not shutil.which("tc"),
                                reason="network namespaces need root, iproute2 and tc")

# (offset, skew_ppm) per worker: one ahead of the driver, one behind it (as if booted up to 2 hours later, but
# never further back than the machine's uptime allows: a TSC cannot go below zero)
SIMULATIONS = [(3 * 3600 * 2_000_000_000, 31.0), (-min(2 * 3600 * 2_000_000_000, cp.tsc() // 2), -44.0)]
ROWS = 20_000  # tuples per phase

DRIVER = r"""
import json, sys, time, urllib.request
import cloudprofiler.spark as cps
from cloudprofiler.harness.standalone import wait_for_executors
from pyspark.sql import functions as F

master, hub_ip, log_dir, local_dir, workers, rows = sys.argv[1:]
workers, rows = int(workers), int(rows)
spark = (cps.builder(log_dir=log_dir, local_dir=local_dir).master(master)
         .config("spark.driver.host", hub_ip).config("spark.driver.bindAddress", hub_ip)
         .config("spark.ui.port", "0").config("spark.executor.memory", "512m")
         .config("spark.cloudprofiler.collect.intervalSeconds", "1")
         .config("spark.executor.cores", "1").config("spark.cores.max", str(workers))
         .config("spark.sql.shuffle.partitions", str(workers))
         .config("spark.cloudprofiler.calibration.interval", "1").getOrCreate())
sc = spark.sparkContext
deadline = time.monotonic() + 120
wait_for_executors(spark, workers)
# executors join the calibration at their first task: run tasks until every one has
import os, pyarrow as pa, pyarrow.ipc as ipc
table = os.path.join(log_dir, sc.applicationId, "tsc-domains.arrows")
while time.monotonic() < deadline:
    sc.parallelize(range(8 * workers), 8 * workers).map(lambda x: time.sleep(0.05) or x).count()
    if os.path.exists(table) and ipc.open_file(pa.OSFile(table)).read_all().num_rows > workers:
        break
print("app", sc.applicationId, flush=True)
for phase in range(3):
    sys.stdin.readline()
    df = cps.trace(spark.range(phase * rows, (phase + 1) * rows, numPartitions=workers), "before", "id")
    df = cps.trace(df.repartition(workers, (F.col("id") * 7919) % 101), "after", "id")
    total = df.agg(F.sum("id")).collect()[0][0]
    print("done", phase, total, flush=True)
    if phase == 0:  # the tab's hops once the executors' samples of this phase have come (an interval apart)
        counts, settled = [], time.monotonic() + 3
        while time.monotonic() < settled + 20:
            with urllib.request.urlopen(sc.uiWebUrl + "/cloudprofiler/json/", timeout=30) as reply:
                hops = json.loads(reply.read())["hops"]
            counts.append(sum(h["count"] for h in hops))
            if time.monotonic() > settled and len(counts) > 3 and counts[-1] == counts[-4]:
                break
            time.sleep(0.5)
        print("hops", json.dumps(hops), flush=True)
sys.stdin.readline()
spark.stop()
print("stopped", flush=True)
"""


def _last_round(app: Path, timeout: float = 60) -> int:
    """The newest round in the published calibration.arrows, once it exists. The table is published by a rename, so
    a read never meets a part of it: a broken file fails here rather than being retried."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with pa.OSFile(str(app / "calibration.arrows")) as f:
                return max(ipc.open_file(f).read_all().column("round").to_pylist())
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _wait_for_round(app: Path, wanted: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _last_round(app) < wanted:
        assert time.monotonic() < deadline, f"no calibration round {wanted} within {timeout} s"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Starts the cluster and the driver, runs the three phases, stops everything; yields what they left."""
    base = tmp_path_factory.mktemp("netns")
    worker_env = [{"CLOUDPROFILER_SIMULATE_TSC": f"offset={offset},skew_ppm={skew}"} for offset, skew in SIMULATIONS]
    with Hosts(len(SIMULATIONS)) as hosts, standalone_cluster(hosts, base, worker_env) as master:
        log_dir = base / "logs"
        env = {k: v for k, v in os.environ.items() if k != "CLOUDPROFILER_SIMULATE_TSC"}
        driver = subprocess.Popen(
            [*hosts.prefix(hosts.hub), sys.executable, "-c", DRIVER, master, hosts.hub_ip, str(log_dir),
             str(base / "local"), str(len(SIMULATIONS)), str(ROWS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=(base / "driver.log").open("w"), text=True,
            env={**env, "SPARK_LOCAL_IP": hosts.hub_ip})
        try:
            def expect(word: str) -> str:
                line = driver.stdout.readline()
                assert line.startswith(word), f"driver said {line!r}, see {base / 'driver.log'}"
                return line

            app = log_dir / expect("app").split()[1]  # every domain has had its first round
            hops = None
            domains = load_domains(app).to_pylist()
            port = {(d["host"], kind): d[f"{kind}_port"] for d in domains for kind in ("responder", "control")}
            for phase in range(3):
                if phase == 1:  # the two workers can no longer probe each other; both still reach the driver
                    a, b = hosts.worker_ips
                    hosts.drop(1, port[(b, "responder")], sender=0)
                    hosts.drop(0, port[(a, "responder")], sender=1)
                if phase == 2:  # worker 1 answers no probe and takes no probe request any more
                    hosts.drop(1, port[(hosts.worker_ips[1], "responder")])
                    hosts.drop(1, port[(hosts.worker_ips[1], "control")])
                driver.stdin.write("go\n")
                driver.stdin.flush()
                expect("done")
                if phase == 0:
                    hops = json.loads(expect("hops").split(" ", 1)[1])
                _wait_for_round(app, _last_round(app) + 2)  # the next round may have begun before the last tuple
            driver.stdin.write("stop\n")
            driver.stdin.flush()
            expect("stopped")
            driver.wait(timeout=60)
            yield app, log_dir, hosts, hops
        finally:
            if driver.poll() is None:
                driver.kill()
            driver.wait(timeout=30)


def _truth(table: pa.Table, domain_of_host: dict, host_sim: dict) -> np.ndarray:
    """Physical TSC difference end - start: undo each host's simulation."""
    def physical(tsc_col, dom_col):
        tsc = table.column(tsc_col).to_numpy().astype(np.float64)
        out = np.empty_like(tsc)
        domains = table.column(dom_col).to_numpy(False)
        for domain in set(domains):
            offset, skew = host_sim[domain_of_host[domain]]
            rows = domains == domain
            out[rows] = (tsc[rows] - offset) / (1 + skew * 1e-6)
        return out

    return physical("end_tsc", "end_domain") - physical("start_tsc", "start_domain")


def test_every_cross_host_duration_holds_its_truth_within_bounds_even_when_calibration_fails(run):
    app, log_dir, hosts, _ = run
    hz = cp.tsc_frequency().hz
    domains = load_domains(app).to_pylist()
    reference = [d for d in domains if d["role"] == "reference"]
    workers = {d["host"]: d for d in domains if d["role"] != "reference"}
    # every worker claimed the driver's boot id and the TSC check split it off into a domain of its own
    assert len(reference) == 1 and set(workers) == set(hosts.worker_ips)
    assert all(d["boot_id"] == reference[0]["boot_id"] != d["domain"] for d in workers.values())
    assert all("differs from" in d["check"] and "founds a domain" in d["check"] for d in workers.values())
    domain_of_host = {d["domain"]: d["host"] for d in domains}
    host_sim = {reference[0]["host"]: (0, 0.0), **dict(zip(hosts.worker_ips, SIMULATIONS))}

    with pa.OSFile(str(app / "calibration.arrows")) as f:
        probes = ipc.open_file(f).read_all()
    pairs = set(zip(*(probes.column(c).to_pylist() for c in ("domain_a", "domain_b", "direction"))))
    w0, w1 = (workers[ip]["domain"] for ip in hosts.worker_ips)
    ref = reference[0]["domain"]
    for a, b in ((ref, w0), (ref, w1), (w0, w1)):  # both directions of every pair, host to host too
        assert {(a, b, "a->b"), (a, b, "b->a")} <= pairs or {(b, a, "a->b"), (b, a, "b->a")} <= pairs

    d = durations_in_reference(app, "before", "after", log_folder=log_dir)
    assert d.num_rows == 3 * ROWS  # every tuple traced before and after the shuffle
    truth = _truth(d, domain_of_host, host_sim)
    value, error = d.column("duration").to_numpy(), d.column("error").to_numpy()
    flagged, path = d.column("extrapolated").to_numpy(False), d.column("path").to_numpy(False)
    phase = d.column("tuple_id").to_numpy() // ROWS
    s_dom, e_dom = d.column("start_domain").to_numpy(False), d.column("end_domain").to_numpy(False)
    cross = s_dom != e_dom
    assert cross.sum() > ROWS  # the shuffle moved tuples between hosts in every phase
    assert np.isfinite(error).all()
    assert np.all(np.abs(value - truth) <= error + 2)  # 100%, flagged or not

    # phase 0: everything calibrated; cross-host bounds under 50 us
    p0 = (phase == 0) & cross
    assert not flagged[p0].any() and error[p0].max() < 50e-6 * hz
    # phase 1: the direct calibration between the workers stopped: its durations route through the driver
    p1 = (phase == 1) & cross
    assert not flagged[p1].any() and set(path[p1]) == {"baseline"}
    # phase 2: worker 1 is cut off: every duration touching it is flagged, the rest not
    touches_w1 = (s_dom == w1) | (e_dom == w1)
    assert touches_w1[phase == 2].any() and (~touches_w1[phase == 2]).any()  # both kinds are there to check
    assert flagged[(phase == 2) & touches_w1].all()
    assert not flagged[(phase == 2) & ~touches_w1].any()
    print(f"\ncross-host bounds: phase 0 median {np.median(error[p0]) / hz * 1e6:.2f} us, max "
          f"{error[p0].max() / hz * 1e6:.2f} us ({sorted(set(path[p0]))}); phase 1 median "
          f"{np.median(error[p1]) / hz * 1e6:.2f} us")
    for method in ("minrtt", "minpair"):
        _, cals = load_calibrations(app, method)
        print(method, {f"{k[0][-4:]}->{k[1][-4:]}": f"{c.err.min() / hz * 1e6:.2f}" for k, c in cals.items()})


def test_the_analysis_reports_these_durations_and_bounds_on_its_time_axis(run):
    """The analysis on Spark gives every cross-host latency the value, bound and path of durations_in_reference,
    and each truth lies inside its bound; tasks and calibration rounds come out bounded."""
    from cloudprofiler.analysis import open_application

    app, log_dir, hosts, _ = run
    analysis = open_application(app)
    hz = analysis.timebase.hz
    got = analysis.latency("before", "after").toPandas().sort_values("tuple_id")
    d = durations_in_reference(app, "before", "after").sort_by("tuple_id")
    assert len(got) == d.num_rows == 3 * ROWS
    assert np.array_equal(got["path"], d.column("path").to_numpy(False))
    assert np.allclose(got["latency_ns"], d.column("duration").to_numpy() / hz * 1e9, rtol=0, atol=1e-3)
    assert np.allclose(got["err_ns"], d.column("error").to_numpy() / hz * 1e9, rtol=1e-12)
    ends = [d.column(c).to_numpy(False) for c in ("start_domain", "end_domain")]
    assert np.array_equal(got["remote"], ends[0] != ends[1])
    domains = load_domains(app).to_pylist()
    reference = next(d for d in domains if d["role"] == "reference")
    host_sim = {reference["host"]: (0, 0.0), **dict(zip(hosts.worker_ips, SIMULATIONS))}
    truth = _truth(d, {x["domain"]: x["host"] for x in domains}, host_sim) / hz * 1e9
    assert np.all(np.abs(got["latency_ns"] - truth) <= got["err_ns"] + 2 / hz * 1e9)
    tasks = analysis.tasks().where("executor_id != 'driver'").toPandas()
    assert not tasks["unbounded"].any() and set(tasks["path"]) == {"scenario1"}
    rounds = analysis.calibration().toPandas()
    assert len({(a, b) for a, b in zip(rounds["domain_a"], rounds["domain_b"])}) == 3
    assert rounds["min_rtt_ns"].median() < 50_000 and rounds["bound_ns"].median() < 50_000
    print(f"\nanalysis: cross-host latency bound median {got['err_ns'][got['remote']].median() / 1e3:.2f} us, "
          f"calibration MinRTT median {rounds['min_rtt_ns'].median() / 1e3:.2f} us, anchor bound median "
          f"{rounds['bound_ns'].median() / 1e3:.2f} us")


def test_the_tab_s_hop_across_hosts_holds_the_truth_within_its_bound(run):
    """The tab's hop before -> after as the first phase left it (every pair calibrated): its durations are sampled
    records' across the two simulated hosts and within one, translated to the driver's TSC with the calibration's
    latest anchors; its min and max lie within its largest bound of the true min and max of the phase's tuples
    (every tuple of the level it states was paired; those paired at a lower level before it rose are more of the
    phase's), and its median within the truth's range."""
    app, log_dir, hosts, hops = run
    hz = cp.tsc_frequency().hz
    [hop] = [h for h in hops if (h["from_channel"], h["to_channel"]) == ("before", "after")]
    domains = load_domains(app).to_pylist()
    domain_of_host = {d["domain"]: d["host"] for d in domains}
    reference = next(d for d in domains if d["role"] == "reference")
    host_sim = {reference["host"]: (0, 0.0), **dict(zip(hosts.worker_ips, SIMULATIONS))}
    d = durations_in_reference(app, "before", "after", log_folder=log_dir)
    phase0 = d.filter(pa.compute.less(d.column("tuple_id"), ROWS))
    truth = _truth(phase0, domain_of_host, host_sim) / hz  # seconds
    level = int(math.log2(hop["sampled_one_in"]))
    ids = phase0.column("tuple_id").to_pylist()
    sampled = truth[np.array([cp.sample_level(i) >= level for i in ids])]
    bound = hop["bound_max_s"]
    print(f"\ntab's hop: {hop}; truth of the phase min {truth.min()}, max {truth.max()}; of the {len(sampled)} ids "
          f"of its level min {sampled.min()}, max {sampled.max()}")
    assert hop["unbounded_count"] == 0 and 0 < hop["remote_count"] < hop["count"]  # both kinds of pairs
    assert hop["count"] >= len(sampled) > 50 and 0 < bound < 100e-6
    assert sampled.min() - bound - 1e-9 <= hop["min_s"] and truth.min() - bound - 1e-9 <= hop["min_s"]
    assert hop["min_s"] <= sampled.min() + bound + 1e-9
    assert sampled.max() - bound - 1e-9 <= hop["max_s"] <= truth.max() + bound + 1e-9
    assert truth.min() - bound <= hop["p50_s"] <= truth.max() + bound
    if hop["count"] == len(sampled):  # the level did not rise during the phase: exactly the ids of its level
        assert abs(hop["min_s"] - sampled.min()) <= bound + 1e-9 and abs(hop["max_s"] - sampled.max()) <= bound + 1e-9
