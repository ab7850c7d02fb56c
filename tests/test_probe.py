"""MinRTT probes between real processes over real sockets, on loopback and between network namespaces; the
responder is a simulated TSC domain (offset of hours, skew of tens of ppm), so the truth is known exactly."""
import hashlib
import hmac
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import cloudprofiler as cp
from cloudprofiler.calibration import Calibration, Probes
from cloudprofiler.calibration.probe import Responder, probe
from cloudprofiler.harness.hosts import Hosts, namespaces_available

PEERS = ("-m", "cloudprofiler.calibration.peers")
OFFSET, SKEW_PPM = 5 * 3600 * 2_000_000_000, -25.0
CP_PROBE_LOSSES_MAX = 8  # native/include/cloudprofiler.h
SIMULATION = {"CLOUDPROFILER_SIMULATE_TSC": f"offset={OFFSET},skew_ppm={SKEW_PPM}"}


def unsimulate(ticks):
    """The physical TSC at which the simulated domain showed `ticks` (within a tick)."""
    return (np.asarray(ticks, dtype=np.float64) - OFFSET) / (1 + SKEW_PPM * 1e-6)


def start_responder(address, prefix=(), secret=""):
    proc = subprocess.Popen([*prefix, sys.executable, *PEERS, "responder", address, secret], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **SIMULATION})
    return proc, int(proc.stdout.readline())


def run_rounds(address, port, rounds, gap_s, prefix=()):
    command = [*prefix, sys.executable, *PEERS, "prober", address, str(port), str(rounds), str(gap_s), "500"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return [Probes.of(r["send"], r["remote"], r["recv"]) for r in json.loads(out.stdout)]


def check_containment(rounds):
    """Calibrate on the first and last rounds, check every probe of the middle rounds against the truth."""
    results = {}
    for method in ("minrtt", "minpair"):
        cal = Calibration.from_rounds([rounds[0], rounds[-1]], method)
        remote = np.concatenate([r.remote for r in rounds[1:-1]])
        est, err, extrapolated = cal.translate(remote)
        truth = unsimulate(remote)
        assert not extrapolated.any()
        assert np.all(np.abs(est - truth) <= err + 1), method
        results[method] = float(np.median(err))
    assert results["minpair"] <= results["minrtt"]
    return results


def test_loopback_rounds_translate_a_simulated_domain_within_bounds():
    proc, port = start_responder("127.0.0.1")
    try:
        rounds = run_rounds("127.0.0.1", port, 4, 0.3)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    bounds = check_containment(rounds)
    hz = cp.tsc_frequency().hz
    assert bounds["minrtt"] / hz < 1e-3  # well under a millisecond on loopback


def test_a_responder_with_a_secret_answers_only_tagged_probes():
    with Responder("127.0.0.1", 0, b"app-secret") as r:
        assert len(probe("127.0.0.1", r.port, 5, secret=b"app-secret").rtt) == 5
        with pytest.raises(cp.PeerTimeoutError, match=f"127.0.0.1:{r.port}"):
            probe("127.0.0.1", r.port, 3, timeout_ms=50, secret=b"other")
        answered, rejected = r.counts()
        assert answered == 5 and rejected == 3


def _request(secret: bytes, tag: bytes | None = None, seq: int = 7, nonce: int = 0x1234_5678_9ABC_DEF0) -> bytes:
    """A probe request as the native prober sends it: magic "CPRQ", seq, nonce, then the tag (HMAC-SHA256 of the
    bytes before it under the secret, its first 16 bytes) unless `tag` is given."""
    body = struct.pack("<IIQ", 0x51525043, seq, nonce)
    return body + (hmac.new(secret, body, hashlib.sha256).digest()[:16] if tag is None else tag)


def _fnv_tag(secret: bytes, body: bytes) -> bytes:
    """The keyed FNV-1a tag the probes once carried, computable from one sniffed packet's key-free bytes."""
    h = 0xCBF29CE484222325
    for b in secret + body:
        h = ((h ^ b) * 0x100000001B3) % 2**64
    return struct.pack("<Q", h)


def test_a_responder_answers_only_probes_whose_hmac_tag_is_made_with_its_secret():
    """The wire format pinned from outside: a request tagged with Python's own HMAC-SHA256 gets an answer tagged the
    same way; a request with a forged tag (the old FNV tag, the right one with one bit flipped, none) is ignored."""
    secret = bytes(range(32))
    with Responder("127.0.0.1", 0, secret) as r, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        s.connect(("127.0.0.1", r.port))
        s.send(_request(secret))
        answer = s.recv(100)
        assert len(answer) == 48 and struct.unpack("<IIQ", answer[:16]) == (0x53525043, 7, 0x1234_5678_9ABC_DEF0)
        assert answer[32:] == hmac.new(secret, answer[:32], hashlib.sha256).digest()[:16]
        body = _request(secret)[:16]
        good = _request(secret)[16:]
        forged = [_fnv_tag(secret, body) + bytes(8), good[:-1] + bytes([good[-1] ^ 1]), bytes(16)]
        s.settimeout(0.2)
        for tag in forged:
            s.send(body + tag)
            with pytest.raises(socket.timeout):
                s.recv(100)
        assert r.counts() == (1, 3)


def test_a_responder_stops_at_once_not_at_its_receive_timeout():
    times = []
    for _ in range(5):
        responder = Responder("127.0.0.1")
        time.sleep(0.01)  # its thread waits in a receive
        t0 = time.perf_counter()
        responder.close()
        times.append(time.perf_counter() - t0)
    assert max(times) < 0.05, times  # the receive times out after 200 ms


def test_a_spinning_prober_waits_asleep_for_a_late_answer(monkeypatch):
    """The prober spins for an answer only about as long as a prompt one takes (4 times the run's best round trip,
    50 to 200 us): a late answer, most often from a responder that waits for a CPU, finds it asleep, so that its
    spinning does not hold that CPU too (executors probing the driver as they started on 2 cores spun 100 ms of CPU
    each). Answers 3 ms late: the prober's thread spends a fraction of the run's time on the CPU, not all of it."""
    monkeypatch.setenv("CLOUDPROFILER_RESPONDER_DELAY_US", "3000,0")
    with Responder("127.0.0.1") as late:
        cpu, wall = time.thread_time(), time.perf_counter()
        probes = probe("127.0.0.1", late.port, 20, 500, spin=True)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    assert len(probes.send) == 20 and wall > 20 * 0.003, wall
    assert cpu < 0.2 * wall, (cpu, wall)


def test_a_silent_peer_times_out_with_its_address_after_a_few_probes_not_all():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # takes probes, answers none
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        with pytest.raises(cp.PeerTimeoutError, match=f"no answer from the probe responder at 127.0.0.1:{port} to 2 "):
            probe("127.0.0.1", port, 2, timeout_ms=30)
        started = time.monotonic()
        with pytest.raises(cp.PeerTimeoutError, match=f"to {CP_PROBE_LOSSES_MAX} probes within 50 ms"):
            probe("127.0.0.1", port, 100, timeout_ms=50)
        assert time.monotonic() - started < 100 * 0.050 / 2  # 8 timeouts, not 100
    with pytest.raises(cp.InvalidArgumentError, match="'not-an-ip'"):
        probe("not-an-ip", 9, 2)


def test_a_closed_port_ends_the_run_at_once_with_its_address():
    with Responder("127.0.0.1", 0) as r:
        port = r.port
        assert len(probe("127.0.0.1", port, 5).rtt) == 5
    started = time.monotonic()
    with pytest.raises(cp.PeerRefusedError, match=f"127.0.0.1:{port} refused"):
        probe("127.0.0.1", port, 100, timeout_ms=200)
    assert time.monotonic() - started < 1  # not 100 timeouts of 200 ms


needs_root = pytest.mark.skipif(not namespaces_available(), reason="network namespaces need root and iproute2")


@pytest.fixture
def hosts():
    """Two hosts: the hub (A) and a worker host (B) on a bridge; removed afterwards."""
    with Hosts(1) as made:
        yield made


@needs_root
def test_namespace_hosts_translate_within_bounds_a_dead_process_refuses_and_a_dead_host_times_out(hosts):
    b_ip = hosts.worker_ips[0]
    proc, port = start_responder(b_ip, prefix=hosts.prefix(hosts.workers[0]))
    try:
        rounds = run_rounds(b_ip, port, 4, 0.3, prefix=hosts.prefix(hosts.hub))
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    check_containment(rounds)
    prober = [*hosts.prefix(hosts.hub), sys.executable, *PEERS, "prober", b_ip, str(port), "1", "0", "5"]
    out = subprocess.run(prober, capture_output=True, text=True, timeout=60)  # host B answers: port unreachable
    assert out.returncode != 0 and f"the probe responder at {b_ip}:{port} refused" in out.stderr
    subprocess.run(["ip", "-n", hosts.workers[0], "link", "set", hosts.links[0], "down"], check=True)  # B says nothing
    out = subprocess.run(prober, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and f"no answer from the probe responder at {b_ip}:{port}" in out.stderr


def thread_slice_ns(tid: int) -> int:
    """The scheduler's time slice of this process's thread `tid` (Linux's /proc sched statistics)."""
    with open(f"/proc/self/task/{tid}/sched") as f:
        return next(int(line.split(":")[1]) for line in f if line.startswith("se.slice"))


SHORT_SLICE_NS = 100_000  # native/src/slice.c


@pytest.mark.skipif(tuple(map(int, re.match(r"(\d+)\.(\d+)", os.uname().release).groups())) < (6, 12),
                    reason="a thread of the normal class sets its own time slice from Linux 6.12 on")
def test_the_prober_and_the_responder_take_short_slices_and_the_caller_gets_its_own_back(monkeypatch):
    """On a busy machine a woken thread waits behind the running one's whole slice unless its own is shorter: the
    responder's thread keeps a short one, the prober takes one for the probes and gives it back."""
    import threading

    before = thread_slice_ns(threading.get_native_id())
    assert before != SHORT_SLICE_NS
    monkeypatch.setenv("CLOUDPROFILER_RESPONDER_DELAY_US", "2000,0")  # 2 ms an answer: the probes take 200 ms
    Responder("127.0.0.1").close()  # the library's own threads start with its first use
    tasks = set(os.listdir("/proc/self/task"))
    with Responder("127.0.0.1") as responder:
        (responder_thread,) = set(os.listdir("/proc/self/task")) - tasks
        probe("127.0.0.1", responder.port, 1, 500)  # answered: the thread has taken its slice (and this one probed)
        assert thread_slice_ns(int(responder_thread)) == SHORT_SLICE_NS
        started, tid = threading.Event(), []

        def probing():
            tid.append(threading.get_native_id())
            started.set()
            probe("127.0.0.1", responder.port, 100, 500)

        prober = threading.Thread(target=probing)
        prober.start()
        started.wait(30)
        seen = set()
        while prober.is_alive():  # the slices the prober's thread has while it probes
            try:
                seen.add(thread_slice_ns(tid[0]))
            except (FileNotFoundError, StopIteration):  # the thread ended between the check and the read
                pass
            time.sleep(0.002)
        prober.join()
    assert SHORT_SLICE_NS in seen, seen
    assert thread_slice_ns(threading.get_native_id()) == before
