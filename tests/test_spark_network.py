"""What the calibration listens on and who it answers, in a real application on local-cluster: the executor runs in
a JVM of its own as a TSC domain of its own (a simulated TSC), so the driver clocks a round every second through the
executor's probe control. The probe secret is made at random by the driver and handed to the executor over Spark's
RPC: nothing derived from the application id opens a responder or the control; the driver's responder listens
where Spark's driver binds; and a neighbour's flood of silent and garbage connections to the executor's control
leaves the rounds running."""
import hashlib
import socket
import subprocess
import time

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.calibration.probe import probe
from cloudprofiler.calibration.spark import load_domains
from cloudprofiler.harness.standalone import wait_for_executors
from neighbour import neighbour

SIMULATION = f"offset={3 * 3600 * 2_000_000_000},skew_ppm=23.0"

# Run as the neighbour with the system's Python (the test's environment need not be readable to that user): keeps
# SILENT connections open that send nothing (reopening those the control closes), and opens GARBAGE connections a
# second that send junk, with or without a line's end, for SECONDS; prints how many of each it opened.
FLOOD = r"""
import socket, sys, time
host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
SILENT, GARBAGE = 100, 400
junk = [b"PROBE x\n", b"\x00\xff" * 40, b"GET / HTTP/1.0\r\n\r\n", b"PROBE " + b"9" * 600]

def alive(s):
    try:
        while True:
            if not s.recv(4096):
                return False
    except BlockingIOError:
        return True
    except OSError:
        return False

silent, opened, garbage = [], 0, 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    kept = []
    for s in silent:
        (kept.append(s) if alive(s) else s.close())
    silent = kept
    while len(silent) < SILENT:
        try:
            s = socket.create_connection((host, port), timeout=1)
        except OSError:
            break
        s.setblocking(False)
        silent.append(s)
        opened += 1
    for i in range(GARBAGE // 20):
        try:
            with socket.create_connection((host, port), timeout=1) as g:
                g.sendall(junk[garbage % len(junk)])
        except OSError:
            pass
        garbage += 1
    time.sleep(0.05)
print("silent", opened, "garbage", garbage, flush=True)
"""


def _probes(app) -> pa.Table:
    with pa.OSFile(str(app / "calibration.arrows")) as f:
        return ipc.open_file(f).read_all()


def _rounds_run_by_the_executor(app) -> set:
    """Rounds in which the executor's control ran its probe run (direction b->a: the executor probes the driver)."""
    t = _probes(app)
    return {r for r, d in zip(t.column("round").to_pylist(), t.column("direction").to_pylist()) if d == "b->a"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("network-logs")
    spark = (
        cps.builder(log_dir=str(log_dir), local_dir=str(tmp_path_factory.mktemp("network-local")))
        .master("local-cluster[1,1,1024]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.CLOUDPROFILER_SIMULATE_TSC", SIMULATION)
        .config("spark.cloudprofiler.calibration.interval", "1")
        .config("spark.cloudprofiler.calibration.probes", "20")  # short runs: rounds stay a second apart
        .config("spark.cloudprofiler.calibration.timeoutMs", "2000")  # a loaded machine answers late, not never
        .getOrCreate()
    )
    try:
        wait_for_executors(spark, 1)
        assert spark.sparkContext.parallelize(range(100), 2).sum() == 4950
        folder = log_dir / spark.sparkContext.applicationId
        deadline = time.monotonic() + 60
        while True:  # the executor's domain appeared and its control ran a first round
            try:
                if _rounds_run_by_the_executor(folder):
                    break
            except FileNotFoundError:
                pass
            assert time.monotonic() < deadline, "no calibration round through the executor's control within 60 s"
            time.sleep(0.2)
        domains = load_domains(folder).to_pylist()
        yield spark, folder, domains
    finally:
        spark.stop()


def _control_request(host: str, port: int, line: str) -> list:
    """One line to a probe control; every line it sent back before it closed the connection."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(line.encode() + b"\n")
        return s.makefile().read().splitlines()


def test_the_application_id_no_longer_opens_the_responders_or_the_control(app):
    """The old secret was SHA-256("cloudprofiler:" + application id), its hex the control's token: a public value.
    Probes tagged with it (or with none) get no answer from the driver's or the executor's responder, and a control
    request with that token is refused; the executor calibrated all the same, with the driver's random secret."""
    spark, folder, domains = app
    old = hashlib.sha256(("cloudprofiler:" + spark.sparkContext.applicationId).encode()).digest()
    executor = next(d for d in domains if d["role"] != "reference")
    driver = next(d for d in domains if d["role"] == "reference")
    assert "founds a domain" in executor["check"]  # its own domain: rounds go through its control
    for d in (driver, executor):
        for key in (old, b""):
            with pytest.raises(cp.PeerTimeoutError):
                probe(d["host"], d["responder_port"], 5, timeout_ms=100, secret=key)
    lines = _control_request(executor["host"], executor["control_port"],
                             f"PROBE {old.hex()} {driver['host']} {driver['responder_port']} 5 500")
    assert lines[-1].startswith("ERR") and not any(line.startswith("OK") for line in lines), lines


def _bound_udp_addresses(port: int) -> set:
    """The local IPv4 addresses that UDP sockets on `port` are bound to (/proc/net/udp)."""
    out = set()
    for line in open("/proc/net/udp").read().splitlines()[1:]:
        address, hex_port = line.split()[1].split(":")
        if int(hex_port, 16) == port:
            out.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return out


def test_the_driver_s_responder_listens_where_spark_s_driver_binds(app):
    spark, folder, domains = app
    driver = next(d for d in domains if d["role"] == "reference")
    assert spark.sparkContext.getConf().get("spark.driver.host") == "127.0.0.1"
    assert _bound_udp_addresses(driver["responder_port"]) == {"127.0.0.1"}  # not 0.0.0.0


def test_a_neighbour_s_flood_of_silent_and_garbage_connections_leaves_the_rounds_running(app):
    """Before, about 20 silent connections every 2 s held the control's 4 workers and 16 queue places, and the
    driver's requests were closed unanswered: the executor's pair backed off. Now a request must come within 2 s,
    only an authenticated one takes a worker, and a peer's oldest waiting connections are closed first."""
    spark, folder, domains = app
    user = neighbour()
    executor = next(d for d in domains if d["role"] != "reference")
    before = max(_rounds_run_by_the_executor(folder))
    seconds = 12.0
    flood = subprocess.Popen(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
         "/usr/bin/python3", "-c", FLOOD, executor["host"], str(executor["control_port"]), str(seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(seconds - 1)
        during = {r for r in _rounds_run_by_the_executor(folder) if r > before}  # while the flood runs
    finally:
        out, err = flood.communicate(timeout=60)
    counts = out.split()
    assert flood.returncode == 0 and counts[0] == "silent", out + err
    silent, garbage = int(counts[1]), int(counts[3])
    print(f"\nflood: {silent} silent and {garbage} garbage connections in {seconds:g} s; the executor's control "
          f"ran rounds {sorted(during)}")
    # a round a second, each with a run through the control (on a loaded machine a round takes seconds)
    assert len(during) >= 2, (before, sorted(during))
    assert silent >= 100 and garbage >= 100  # far beyond the 20 connections a 2 s that locked the control out
