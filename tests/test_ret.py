"""Return-trip (ReT) handlers over real UDP sockets: every acknowledgement arrives once, bounds contain the
truth, foreign datagrams are counted, bad parameters are named; and a pair across two network namespaces."""
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import cloudprofiler as cp
from cloudprofiler.errors import InvalidArgumentError
from cloudprofiler.harness.bench.accuracy import END_NODES, measure_ret, ret_statistics
from cloudprofiler.harness.hosts import Hosts, namespaces_available
from cloudprofiler.ret import ret_bounds, ret_end, ret_start


def wait_for(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_every_tuple_is_acknowledged_once_and_its_bound_holds_the_truth(log_dir):
    start = ret_start("ret-loop")
    info = start.ret_info
    end = ret_end("ret-loop-end", "127.0.0.1", info.port)
    for i in range(2000):
        start.log(i)
        end.log(i)
        if i % 100 == 99:
            time.sleep(0.001)  # UDP: a burst larger than the socket buffer loses acknowledgements
    time.sleep(0.3)
    assert end.ret_info.send_failures == 0
    end.close()
    start.close()
    acks = cp.read_log(info.ack_path)
    assert sorted(acks.column("tuple_id").to_pylist()) == list(range(2000))
    bounds = ret_bounds(cp.read_log(start.path), acks)
    ends = cp.read_log(end.path).column("tsc").to_numpy().astype(np.int64)
    true = ends - bounds.column("start_tsc").to_numpy().astype(np.int64)
    assert (true >= 0).all() and (true <= bounds.column("bound_ticks").to_numpy()).all()
    assert cp.log_metadata(acks)["ret.port"].strip() == str(info.port)


def test_foreign_datagrams_are_counted_not_logged(log_dir):
    with ret_start("ret-foreign") as start:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"not an acknowledgement", ("127.0.0.1", start.ret_info.port))
        assert wait_for(lambda: start.ret_info.rejected == 1)
        ack_path = start.ret_info.ack_path
    assert cp.read_log(ack_path).num_rows == 0


def _ack(tuple_id: int) -> bytes:
    """An acknowledgement as ret_end sends it without a key: magic "CPAK", padding, the id, a zero tag."""
    return struct.pack("<IIqQ", 0x4B415043, 0, tuple_id, 0)


def test_with_a_key_only_acknowledgements_of_that_key_are_logged(log_dir):
    key = 0x5EC2E7_0F_A99
    with ret_start("ret-keyed", key=key) as start:
        port = start.ret_info.port
        with ret_end("ret-keyed-end", "localhost", port, key=key) as same, \
                ret_end("ret-keyed-other", "127.0.0.1", port, key=key + 1) as other:
            for i in range(100):
                same.log(i)
                other.log(1000 + i)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(_ack(5000), ("127.0.0.1", port))  # well formed, but untagged
        assert wait_for(lambda: start.ret_info.rejected == 101)
        ack_path = start.ret_info.ack_path
    assert sorted(cp.read_log(ack_path).column("tuple_id").to_pylist()) == list(range(100))
    assert cp.log_metadata(cp.read_log(start.path))["handler.params"] == [0]  # the port asked for; never the key


def test_acknowledgements_the_kernel_drops_are_counted(tmp_path):
    """The start node's process is stopped (SIGSTOP) while 20,000 acknowledgements arrive: its receive buffer
    overflows. After SIGCONT, every acknowledgement is either logged or counted as an overflow."""
    node = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, cloudprofiler as cp
            from cloudprofiler.ret import ret_start
            cp.start({str(tmp_path)!r})
            start = ret_start("ret-overflow")
            print(start.ret_info.port, flush=True)
            sys.stdin.readline()
            info = start.ret_info
            start.close()
            print(cp.read_log(info.ack_path).num_rows, info.overflows, info.rejected, flush=True)
            """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(node.stdout.readline())
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            node.send_signal(signal.SIGSTOP)
            for i in range(20_000):
                sock.sendto(_ack(i), ("127.0.0.1", port))
            node.send_signal(signal.SIGCONT)
            time.sleep(0.5)
            for i in range(20_000, 20_010):  # the kernel reports drops with the next datagram that arrives
                sock.sendto(_ack(i), ("127.0.0.1", port))
                time.sleep(0.01)
        time.sleep(0.3)
        out, _ = node.communicate("done\n", timeout=30)
    finally:
        node.kill()
    logged, overflows, rejected = map(int, out.split())
    assert overflows > 0 and rejected == 0
    assert logged + overflows == 20_010


@pytest.mark.parametrize("make,message", [
    (lambda: ret_end("x", "not-an-address", 5000), "ret_end address 'not-an-address' does not resolve to an IPv4"),
    (lambda: ret_end("x", "127.0.0.1", 70000), "ret_end port=70000 is out of range"),
    (lambda: ret_start("x", -1), "ret_start port=-1 is out of range"),
    (lambda: cp.Channel("x", "ret_end", (1,)), "handler ret_end takes 3 parameter"),
])
def test_bad_parameters_name_the_value(log_dir, make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make()


def test_ret_info_of_another_handler_is_refused(log_dir):
    with cp.Channel("plain", "buffered") as ch:
        with pytest.raises(InvalidArgumentError, match="not a ret_start or ret_end channel"):
            ch.ret_info


@pytest.mark.skipif(not namespaces_available(), reason="network namespaces need root and iproute2")
@pytest.mark.parametrize("end_node", END_NODES)
def test_a_pair_across_network_namespaces_contains_every_true_duration(end_node):
    with Hosts(1) as hosts:
        ret = measure_ret(hosts, 500, end_node)
    assert len(ret["bound"]) == 500  # UDP through a bridge at this pace loses nothing
    assert (ret["true"] >= 0).all() and (ret["true"] <= ret["bound"]).all()


def test_the_ret_statistics_of_known_bounds():
    assert ret_statistics(np.arange(1, 101)) == {"p50": 50.5, "p99": pytest.approx(99.01), "mean": 50.5}
    assert ret_statistics(np.array([10] * 99 + [10_000])) == {"p50": 10, "p99": pytest.approx(109.9),
                                                               "mean": pytest.approx(109.9)}
