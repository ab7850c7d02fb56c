"""`cloudprofiler calibrate`: MinRTT rounds from this host (the reference) to probe responders on other hosts.

    cloudprofiler calibrate --serve --port 7447 --secret-file ~/.cp-secret   # on every other host
    cloudprofiler calibrate hostB:7447 hostC:7447 --secret-file ~/.cp-secret --out calibration.arrows

Probes carry an HMAC under a shared secret: a responder answers only probes made with it, and the prober takes
only answers made with it. The secret is the first line of a file (up to 64 bytes, given by --secret-file, read
by both sides, never on a command line where `ps` shows it); `--serve` without --secret-file makes a random one
and prints it, and `--serve --secret-file F` writes a new one into F (0600) when F does not exist yet.
"""
from __future__ import annotations

import os
import secrets
import socket
import sys
import time

SECRET_MAX = 64  # bytes: the native library's limit


def add_arguments(parser) -> None:
    parser.epilog = ("Probes carry an HMAC-SHA256 under a shared secret, the first line of --secret-file on both "
                     "sides: a responder answers only probes made with it, a prober takes only answers made with "
                     "it. --serve without --secret-file makes a random secret and prints it.")
    parser.add_argument("peers", nargs="*", metavar="HOST:PORT", help="probe responders to calibrate against")
    parser.add_argument("--serve", action="store_true", help="run a probe responder here until interrupted")
    parser.add_argument("--address", default="0.0.0.0", help="responder address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=7447, help="responder port (default 7447, 0: any)")
    parser.add_argument("--secret-file", metavar="FILE",
                        help="the shared secret, the file's first line (at most 64 bytes); required to probe; "
                             "--serve without it makes a random secret and prints it, and writes one into FILE "
                             "(mode 0600) when FILE does not exist")
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


def read_secret(path: str) -> bytes:
    """The secret in `path`: its first line, without the line's end; exits naming the file when it cannot."""
    try:
        with open(path, "rb") as f:
            secret = f.readline().rstrip(b"\r\n")
    except OSError as exc:
        raise SystemExit(f"--secret-file {path}: {exc.strerror}") from None
    if not 0 < len(secret) <= SECRET_MAX:
        raise SystemExit(f"--secret-file {path}: its first line has {len(secret)} bytes: expected 1 to {SECRET_MAX}")
    return secret


def new_secret(path: str | None) -> bytes:
    """A random secret (64 hex digits), written into `path` when given, which must not exist (mode 0600)."""
    secret = secrets.token_hex(32).encode()
    if path:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise SystemExit(f"--secret-file {path}: cannot create it: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as f:
            f.write(secret + b"\n")
    return secret


def serve(args) -> int:
    from .probe import Responder

    if args.secret_file and os.path.lexists(args.secret_file):
        secret = read_secret(args.secret_file)
    else:
        secret = new_secret(args.secret_file)
        if args.secret_file:
            print(f"a new secret written to {args.secret_file}: give the prober a copy (--secret-file)", flush=True)
        else:
            print(f"secret {secret.decode()} (give it to the prober in a file: --secret-file)", flush=True)
    with Responder(args.address, args.port, secret) as r:
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
    if not args.secret_file:
        raise SystemExit("give --secret-file: the responders' secret (their --serve printed or wrote it)")
    secret = read_secret(args.secret_file)
    rows, rounds, failed = [], {text: [] for text in peers}, []
    best = {text: np.inf for text in peers}  # per peer, the smallest round trip seen: a delayed round is retaken
    for i in range(args.rounds):
        if i:
            time.sleep(args.gap)
        for text, (address, port) in peers.items():
            if text in failed:
                continue
            try:
                p = retaken_round(lambda: probe_round(address, port, args.count, args.timeout_ms, secret),
                                  best[text])
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
