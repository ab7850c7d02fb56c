"""Return-trip (ReT) measurement, the paper's baseline: the end node acknowledges every tuple to the start
node, whose clock alone then bounds the duration by the whole return trip.

    start = ret_start("hop", port=0, key=k)           # on node A; start.ret_info.port is where acks arrive
    end = ret_end("hop", "node-a", port, key=k)       # on node B (a host name or an IPv4 address)
    start.log(i) ... end.log(i)                       # the end sends i back to A
    bounds = ret_bounds(read_log(start.path), read_log(start.ret_info.ack_path))
"""
from __future__ import annotations

import errno
import socket
from typing import Mapping

import numpy as np
import pyarrow as pa

from .channel import Channel
from .errors import InvalidArgumentError


def ret_start(name: str, port: int = 0, key: int = 0, metadata: Mapping[str, str] | None = None) -> Channel:
    """A channel that logs starts and listens on UDP `port` (0: any free port) for acknowledgements; with a `key`
    (a shared 64-bit secret, 0: none) it accepts only acknowledgements of ends with the same key."""
    return Channel(name, "ret_start", (port, key), metadata)


def ret_end(name: str, address: str, port: int, key: int = 0, metadata: Mapping[str, str] | None = None) -> Channel:
    """A channel that logs ends and acknowledges each id to the start node at address:port (a host name or an
    IPv4 address), tagged with `key` when it is not 0."""
    try:
        resolved = socket.getaddrinfo(address, None, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
    except (OSError, UnicodeError) as e:
        raise InvalidArgumentError(
            errno.EINVAL, f"ret_end address {address!r} does not resolve to an IPv4 address ({e})") from None
    packed = int.from_bytes(socket.inet_aton(resolved), "big")
    return Channel(name, "ret_end", (packed, port, key), metadata)


def ret_bounds(starts: pa.Table, acks: pa.Table) -> pa.Table:
    """Per acknowledged tuple: start TSC, ack TSC and the ReT bound (ack - start, in ticks) on the start
    node's clock. A tuple logged twice keeps its first start and first acknowledgement; a tuple whose
    acknowledgement was lost (UDP) has no bound and is left out: compare the row count with the starts."""
    s = starts.group_by("tuple_id").aggregate([("tsc", "min")]).rename_columns(["tuple_id", "start_tsc"])
    a = acks.group_by("tuple_id").aggregate([("tsc", "min")]).rename_columns(["tuple_id", "ack_tsc"])
    joined = s.join(a, "tuple_id", join_type="inner").sort_by("tuple_id")
    bound = (joined.column("ack_tsc").to_numpy().astype(np.int64)
             - joined.column("start_tsc").to_numpy().astype(np.int64))
    return joined.append_column("bound_ticks", pa.array(bound))


def serve_ends(listen: str, start_address: str, start_port: int, timeout_s: float = 30.0) -> str:
    """Node B of a ReT pair: receive tuple ids (8-byte datagrams) on `listen`'s printed port, log each as an
    end (which acknowledges it to node A); id -1 ends the run. Returns the end channel's file path."""
    import socket
    import struct
    import sys

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((listen, 0))
    sock.settimeout(timeout_s)
    end = ret_end("ret.end", start_address, start_port)
    print(sock.getsockname()[1], flush=True)  # once the end channel is open: no tuple waits for it
    try:
        while True:
            try:
                (tuple_id,) = struct.unpack("<q", sock.recv(8))
            except socket.timeout:
                print(f"no tuple from node A for {timeout_s} s: stopping", file=sys.stderr)
                break
            if tuple_id < 0:
                break
            end.log(tuple_id)
    finally:
        end.close()
        sock.close()
    return end.path


def send_starts(channel: Channel, address: str, port: int, count: int, gap_s: float = 100e-6) -> None:
    """Node A of a ReT pair: log the start of tuples 0..count-1 and send each to node B, `gap_s` apart (so
    the bound measures the return trip, not a queue of tuples), then the end mark (thrice: UDP may drop)."""
    import socket
    import struct
    import time

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for i in range(count):
            channel.log(i)
            sock.sendto(struct.pack("<q", i), (address, port))
            if gap_s:
                time.sleep(gap_s)
        for _ in range(3):
            sock.sendto(struct.pack("<q", -1), (address, port))
            time.sleep(0.01)


def main(argv: list[str]) -> None:
    """Two processes make a ReT pair (run them on two hosts, or in two network namespaces):
        python -m cloudprofiler.ret start <node B address> <count>   # prints its ack port, reads B's port
        python -m cloudprofiler.ret end <listen address> <node A address> <node A ack port>   # prints its port
    At the end, node A prints {"starts": path, "acks": path} and node B the path of its end records."""
    import json
    import sys
    import time

    from .library import start

    start()
    if argv[0] == "start":
        channel = ret_start("ret.start")
        print(channel.ret_info.port, flush=True)
        peer_port = int(sys.stdin.readline())
        send_starts(channel, argv[1], peer_port, int(argv[2]))
        time.sleep(0.5)  # the last acknowledgements are on their way
        info = channel.ret_info
        channel.close()
        print(json.dumps({"starts": channel.path, "acks": info.ack_path, "rejected": info.rejected}), flush=True)
    elif argv[0] == "end":
        print(serve_ends(argv[1], argv[2], int(argv[3])), flush=True)
    else:
        raise SystemExit(f"unknown role {argv[0]!r}: expected start or end")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
