"""Probe peers as processes of their own (`python -m cloudprofiler.calibration.peers ...`), for runs where each
peer must be another TSC domain or live in another network namespace:

    responder <address> [secret]                      prints its port, answers until stdin closes
    prober <address> <port> <rounds> <gap_s> <timeout_ms>   prints the rounds as JSON
"""
import json
import sys
import time


def responder(address: str, secret: str) -> None:
    from cloudprofiler.calibration.probe import Responder

    with Responder(address, 0, secret.encode()) as r:
        print(r.port, flush=True)
        sys.stdin.read()  # until the test closes our stdin


def prober(address: str, port: int, rounds: int, gap_s: float, timeout_ms: int) -> None:
    from cloudprofiler.calibration.probe import probe_round, retaken_round

    def take():
        return probe_round(address, port, 100, timeout_ms)

    best = take().rtt.min()  # a first look at the path, so that the first round too is held to it
    out = []
    for i in range(rounds):
        if i:
            time.sleep(gap_s)
        p = retaken_round(take, best)
        best = min(best, p.rtt.min())
        out.append({"send": p.send.tolist(), "remote": p.remote.tolist(), "recv": p.recv.tolist()})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "responder":
        responder(rest[0], rest[1] if len(rest) > 1 else "")
    else:
        prober(rest[0], int(rest[1]), int(rest[2]), float(rest[3]), int(rest[4]))
