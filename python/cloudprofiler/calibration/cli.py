"""`cloudprofiler calibrate`: MinRTT rounds from this host (the reference) to probe responders on other hosts.

    cloudprofiler calibrate --serve --port 7447          # on every other host
    cloudprofiler calibrate hostB:7447 hostC:7447 --out calibration.arrows
"""
from __future__ import annotations

import socket
import sys
import time


def add_arguments(parser) -> None:
    parser.add_argument("peers", nargs="*", metavar="HOST:PORT", help="probe responders to calibrate against")
    parser.add_argument("--serve", action="store_true", help="run a probe responder here until interrupted")
    parser.add_argument("--address", default="0.0.0.0", help="responder address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=7447, help="responder port (default 7447, 0: any)")
    parser.add_argument("--secret", default="", help="shared secret: answer and send only tagged probes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per peer (default 3)")
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between rounds (default 1)")
    parser.add_argument("--count", type=int, default=100, help="probes per round (default 100)")
    parser.add_argument("--timeout-ms", type=int, default=200, help="wait per probe (default 200 ms)")
    parser.add_argument("--out", default="calibration.arrows", help="Arrow table of every probe")
    parser.add_argument("--force", action="store_true", help="measure even without an invariant TSC")


def _peer(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"peer {text!r} is not HOST:PORT")
    try:
        return socket.gethostbyname(host), int(port)
    except OSError as exc:
        raise SystemExit(f"peer {text!r}: cannot resolve {host}: {exc}") from None


def serve(args) -> int:
    from .probe import Responder

    with Responder(args.address, args.port, args.secret.encode()) as r:
        print(f"answering probes on {args.address}:{r.port} (Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            answered, rejected = r.counts()
            print(f"answered {answered} probes, rejected {rejected}")
    return 0


def run(args) -> int:
    from ..native import call, lib

    call(lib.cp_require_invariant_tsc, int(args.force))
    if args.serve:
        return serve(args)
    if not args.peers:
        raise SystemExit("give HOST:PORT of at least one responder, or --serve")
    if args.rounds < 2 or args.count < 1:
        raise SystemExit(f"--rounds={args.rounds} must be at least 2 and --count={args.count} at least 1")
    import numpy as np
    import pyarrow as pa

    import cloudprofiler as cp

    from ..errors import PeerRefusedError, PeerTimeoutError
    from .probe import probe_round, retaken_round
    from .translate import Calibration

    peers = {text: _peer(text) for text in args.peers}
    rows, rounds, failed = [], {text: [] for text in peers}, []
    best = {text: np.inf for text in peers}  # per peer, the smallest round trip seen: a delayed round is retaken
    for i in range(args.rounds):
        if i:
            time.sleep(args.gap)
        for text, (address, port) in peers.items():
            if text in failed:
                continue
            try:
                p = retaken_round(lambda: probe_round(address, port, args.count, args.timeout_ms,
                                                      args.secret.encode()), best[text])
                best[text] = min(best[text], p.rtt.min())
            except (PeerTimeoutError, PeerRefusedError) as exc:
                print(f"{text}: {exc}; its durations stay unbounded", file=sys.stderr)
                failed.append(text)
                continue
            rounds[text].append(p)
            rows.append(pa.table({"peer": [text] * len(p.rtt), "round": np.full(len(p.rtt), i, np.int32),
                                  "send_tsc": p.send, "remote_tsc": p.remote, "recv_tsc": p.recv}))
        print(f"round {i + 1}/{args.rounds} done", file=sys.stderr)
    hz = cp.tsc_frequency().hz
    if rows:
        table = pa.concat_tables(rows).replace_schema_metadata(
            {"reference.host": socket.gethostname(), "tsc.hz": str(hz), "probes.per_round": str(args.count)})
        with pa.OSFile(args.out, "wb") as f, pa.ipc.new_file(f, table.schema) as writer:
            writer.write_table(table)
    for text, data in rounds.items():
        if len(data) < 2:
            continue
        cal = Calibration.from_rounds(data)
        rate, _ = cal.rate_overall()
        print(f"{text}: MinRTT {min(r.rtt.min() for r in data) / hz * 1e6:.2f} us, bound e "
              f"{cal.err[cal.used].max() / hz * 1e6:.2f} us, rate {(rate - 1) * 1e6:+.3f} ppm against this host")
    print(f"{sum(len(t) for t in rows)} probes written to {args.out}")
    return 1 if failed else 0
