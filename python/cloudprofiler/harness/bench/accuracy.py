"""`cloudprofiler bench accuracy`: the error bounds achieved between two TSC domains on this machine.

The responder runs in a process of its own as a simulated TSC domain (offset of hours, skew of tens of ppm), on a
second host when run as root (`harness.hosts`: two network namespaces joined by a bridge; else on loopback), each
host's processes on a CPU of their own (`on_host_cpu`), so every translated value can be checked against the exact
truth. Rounds alternate: the even ones and the last give the anchors, the odd ones' remote TSCs are the values
checked. `--load N` measures again while N processes spin on the machine's cores (as executors busy with tasks do
while Spark calibrates), side by side with the quiet run; `--runs N` takes N such pairs one after the other, prints
every run's bound and judges the loaded bound against the quiet one run by run (LOAD_GOAL).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys

import numpy as np

from ..hosts import Hosts, namespaces_available
from . import native_program

OFFSET, SKEW_PPM = 4 * 3600 * 2_000_000_000, 37.0
RET_TUPLES = 2000
END_NODES = ("native", "python")  # node B of the ReT pair: cp_ret_end (C), or python -m cloudprofiler.ret end
PAPER_CP_BOUND_NS, PAPER_RET_BOUND_NS = 51_200, 266_390
LOAD_GOAL = 2.0  # under load, the CP bound within this factor of the quiet runs' median, in every run


def add_arguments(parser) -> None:
    parser.add_argument("--rounds", type=int, default=6, help="probe rounds of 100 probes (default 6)")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between rounds (default 0.5)")
    parser.add_argument("--loopback", action="store_true", help="stay on loopback even when run as root")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="measure again with N processes spinning on the cores (e.g. 8), beside the quiet run")
    parser.add_argument("--runs", type=int, default=1,
                        help="measurements of each kind, one after the other, every one printed (default 1)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def on_host_cpu(host: int):
    """A subprocess start hook that keeps a simulated host's processes on a CPU of their own (host 0, the hub, on
    the first CPU, host 1 on the second), as two machines' processes are: left to the kernel, both sides of a probe
    sometimes shared a CPU for whole rounds, each round trip then two context switches long (7.8-12.1 us under 8
    spinning processes, against 4.7-6.9 us on two CPUs, read per probe from the CPU each side stamps with its
    TSC), which no two hosts show. None on a machine of one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return (lambda: os.sched_setaffinity(0, {cpus[host]})) if len(cpus) > 1 else None


def measure(rounds: int, gap: float, use_namespaces: bool) -> dict:
    import cloudprofiler as cp
    from cloudprofiler.calibration import Calibration, Probes, durations

    peers = [sys.executable, "-m", "cloudprofiler.calibration.peers"]
    env = {**os.environ, "CLOUDPROFILER_SIMULATE_TSC": f"offset={OFFSET},skew_ppm={SKEW_PPM}"}
    with Hosts(1, use_namespaces) as hosts:  # the prober in the hub, the responder on the worker host
        address = hosts.worker_ips[0]
        responder = subprocess.Popen([*hosts.prefix(hosts.workers[0]), *peers, "responder", address],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=on_host_cpu(1))
        try:
            port = responder.stdout.readline().strip()
            out = subprocess.run([*hosts.prefix(hosts.hub), *peers, "prober", address, port, str(rounds), str(gap),
                                  "500"],
                                 check=True, capture_output=True, text=True, timeout=120 + rounds * gap,
                                 preexec_fn=on_host_cpu(0))
        finally:
            responder.stdin.close()
            responder.wait(timeout=30)
        ret = {end_node: measure_ret(hosts, RET_TUPLES, end_node) for end_node in END_NODES}
    data = [Probes.of(r["send"], r["remote"], r["recv"]) for r in json.loads(out.stdout)]
    hz = cp.tsc_frequency().hz
    ns = 1e9 / hz
    anchors = data[:-1:2] + [data[-1]]
    remote = np.concatenate([r.remote for r in data[1:-1:2]])
    truth = (remote.astype(np.float64) - OFFSET) / (1 + SKEW_PPM * 1e-6)
    result = {"hosts": "network namespaces" if use_namespaces else "loopback",
              "minrtt_ns": float(min(r.rtt.min() for r in data)) * ns, "samples": int(remote.size)}
    contained = []
    for method, key in (("minrtt", "cp_bound_ns"), ("minpair", "minpair_bound_ns")):
        cal = Calibration.from_rounds(anchors, method)
        est, err, _ = cal.translate(remote)
        contained.append(np.abs(est - truth) <= err + 1)
        result[key] = float(np.median(err)) * ns
        if method == "minrtt":
            # a 100 us duration on the responder's host (Scenario 1) and across hosts (Scenario 2)
            start = remote[: remote.size // 2]
            end = start + int(100e-6 * hz)
            s1 = durations("B", start, "B", end, "A", {("A", "B"): cal})
            s2 = durations("A", np.round(truth[: start.size]).astype(np.int64), "B", end, "A", {("A", "B"): cal})
            result["scenario1_bound_ns"] = float(np.median(s1.error)) * ns
            result["scenario2_bound_ns"] = float(np.median(s2.error)) * ns
            result["baseline_bound_ns"] = 2 * result["cp_bound_ns"]
    result["contained_fraction"] = float(np.mean(np.concatenate(contained)))
    for end_node, pair in ret.items():
        statistics = ret_statistics(pair["bound"])
        result.update({f"ret_{end_node}_{name}_ns": value * ns for name, value in statistics.items()})
    result["ret_contained_fraction"] = float(np.mean(np.concatenate(
        [(pair["true"] >= 0) & (pair["true"] <= pair["bound"]) for pair in ret.values()])))
    return result


def ret_statistics(bounds: np.ndarray) -> dict:
    """The median, 99th percentile and mean of a run's ReT bounds (any unit)."""
    return {"p50": float(np.median(bounds)), "p99": float(np.percentile(bounds, 99)), "mean": float(np.mean(bounds))}


def measure_ret(hosts: "Hosts", count: int, end_node: str = "python") -> dict:
    """A ReT pair between the two hosts (one physical TSC, so each true duration is known), node A in Python and
    node B in Python or in C (`end_node`, one of END_NODES): per tuple, the bound (ack arrival - start on node A)
    and the true duration (end on node B - start), in ticks."""
    import cloudprofiler as cp
    from cloudprofiler.ret import ret_bounds

    role = [sys.executable, "-m", "cloudprofiler.ret"]
    b_address = hosts.worker_ips[0]
    end_role = {"python": [*role, "end"], "native": [str(native_program("cp_ret_end"))]}[end_node]
    node_a = subprocess.Popen([*hosts.prefix(hosts.hub), *role, "start", b_address, str(count)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=on_host_cpu(0))
    try:
        a_port = node_a.stdout.readline().strip()
        node_b = subprocess.Popen([*hosts.prefix(hosts.workers[0]), *end_role, b_address, hosts.hub_ip, a_port],
                                  stdout=subprocess.PIPE, text=True, preexec_fn=on_host_cpu(1))
        node_a.stdin.write(node_b.stdout.readline())
        node_a.stdin.flush()
        files = json.loads(node_a.stdout.readline())
        end_path = node_b.stdout.readline().strip()
        node_b.wait(timeout=30)
    finally:
        node_a.kill() if node_a.poll() is None else None
    bounds = ret_bounds(cp.read_log(files["starts"]), cp.read_log(files["acks"]))
    ends = cp.read_log(end_path).to_pandas().set_index("tuple_id")["tsc"]
    ids = bounds.column("tuple_id").to_numpy()
    true = ends.loc[ids].to_numpy().astype(np.int64) - bounds.column("start_tsc").to_numpy().astype(np.int64)
    return {"bound": bounds.column("bound_ticks").to_numpy(), "true": true, "sent": count}


@contextlib.contextmanager
def spinning(processes: int):
    """`processes` processes that keep the cores busy until the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def load_verdict(quiet: list[float], loaded: list[float], goal: float = LOAD_GOAL) -> dict:
    """The loaded runs' CP bounds against the quiet runs' median: each run's ratio, and whether every run is within
    `goal` of it."""
    reference = float(np.median(quiet))
    ratios = [bound / reference for bound in loaded]
    return {"quiet_median_ns": reference, "ratios": ratios, "within": sum(r <= goal for r in ratios),
            "met": bool(ratios) and all(r <= goal for r in ratios)}


def run(args) -> int:
    problem = (f"--rounds={args.rounds}: at least 3 (two to calibrate, one to check)" if args.rounds < 3 else
               f"--gap={args.gap}: seconds between rounds, a finite number >= 0" if not 0 <= args.gap < math.inf else
               f"--load={args.load}: a number of spinning processes, 0 or more" if args.load < 0 else
               f"--runs={args.runs}: at least 1" if args.runs < 1 else None)
    if problem:
        print(f"cloudprofiler bench accuracy: {problem}", file=sys.stderr)
        return 2
    use_namespaces = not args.loopback and namespaces_available()
    loaded = f"load {args.load}"
    runs: dict[str, list[dict]] = {"quiet": []} | ({loaded: []} if args.load else {})
    for i in range(args.runs):
        runs["quiet"].append(measure(args.rounds, args.gap, use_namespaces))
        if args.load:
            with spinning(args.load):
                runs[loaded].append(measure(args.rounds, args.gap, use_namespaces))
        if args.runs > 1:
            print(f"run {i + 1} of {args.runs}: CP bound e " + ", ".join(
                f"{name} {r[-1]['cp_bound_ns'] / 1e3:.1f} us" for name, r in runs.items()),
                file=sys.stderr if args.json else sys.stdout, flush=True)
    results = {name: _median_run(r) for name, r in runs.items()}
    verdict = load_verdict([r["cp_bound_ns"] for r in runs["quiet"]], [r["cp_bound_ns"] for r in runs[loaded]]) \
        if args.load else None
    # a bound that does not hold is a defect, not a figure: say so and fail
    escaped = [f"{name}, run {i + 1}" for name, r in runs.items() for i, one in enumerate(r)
               if one["contained_fraction"] < 1 or one["ret_contained_fraction"] < 1]
    if args.json:
        print(json.dumps({"medians": results, "runs": runs, "load_verdict": verdict}
                         if args.load or args.runs > 1 else results["quiet"], indent=1))
        return 1 if escaped else 0
    rows = [("MinRTT (round trip)", "minrtt_ns", None),
            ("CP bound e (MinRTT / 2)", "cp_bound_ns", PAPER_CP_BOUND_NS),
            ("Scenario 2 (start on reference host)", "scenario2_bound_ns", None),
            ("min-pair bound", "minpair_bound_ns", None),
            ("Scenario 1, 100 us on one host", "scenario1_bound_ns", None),
            ("baseline (2e)", "baseline_bound_ns", None),
            *((f"ReT, {end_node} end node, {name}", f"ret_{end_node}_{key}_ns", PAPER_RET_BOUND_NS if key == "mean"
               else None) for end_node in END_NODES for key, name in (("p50", "median"), ("p99", "p99"),
                                                                       ("mean", "mean")))]
    for name, result in results.items():
        print(f"{name}: hosts: {result['hosts']}, {result['samples']} translated values, "
              f"{result['contained_fraction']:.4%} inside their bounds; ReT: "
              f"{result['ret_contained_fraction']:.4%} of true durations inside their bounds")
    print(f"{'bound':<38}" + "".join(f" {name + ' (ns)':>16}" for name in results) + f" {'paper (ns)':>12}")
    for name, key, paper in rows:
        print(f"{name:<38}" + "".join(f" {round(r[key], 1)!s:>16}" for r in results.values())
              + f" {paper if paper else '':>12}")
    if args.runs > 1:
        print(f"(medians over {args.runs} runs; contained: the smallest share over the runs)")
        for name, r in runs.items():
            bounds = [one["cp_bound_ns"] / 1e3 for one in r]
            print(f"CP bound e, {name}, each run (us): {' '.join(f'{b:.1f}' for b in bounds)} "
                  f"(spread {min(bounds):.1f}..{max(bounds):.1f})")
    if verdict:
        print(f"{loaded} against quiet (goal: each run's CP bound within {LOAD_GOAL:g}x the quiet median, "
              f"{verdict['quiet_median_ns'] / 1e3:.1f} us): " + " ".join(f"{r:.2f}x" for r in verdict["ratios"])
              + f": {verdict['within']} of {len(verdict['ratios'])} within, {'met' if verdict['met'] else 'not met'}")
    for name in escaped:
        print(f"{name}: some true values lie outside their bounds: the bounds above are not strict")
    return 1 if escaped else 0


def _median_run(runs: list[dict]) -> dict:
    """One row per figure: the median over the runs, and the smallest share of values inside their bounds."""
    merged = {key: float(np.median([r[key] for r in runs])) for key, value in runs[0].items()
              if isinstance(value, (int, float))}
    merged.update(hosts=runs[0]["hosts"], samples=runs[0]["samples"],
                  contained_fraction=min(r["contained_fraction"] for r in runs),
                  ret_contained_fraction=min(r["ret_contained_fraction"] for r in runs))
    return merged
