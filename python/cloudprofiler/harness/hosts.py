"""Hosts on one machine: a hub network namespace holding a bridge, and one namespace per worker joined to the bridge
by a veth link (root and iproute2 needed). Without namespaces every host is this machine on loopback, so callers
write one code path for both.

    with Hosts(workers=2) as hosts:                  # or Hosts(2, namespaces=False): loopback
        subprocess.Popen([*hosts.prefix(hosts.workers[0]), "my-server", hosts.worker_ips[0]])
        with hosts.entered(hosts.hub):               # this thread (and what it starts) now lives in the hub
            ...
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import random
import secrets
import shutil
import subprocess

LOOPBACK = "127.0.0.1"
CLONE_NEWNET = 0x40000000  # <sched.h>


def namespaces_available() -> bool:
    """Whether this process may build network namespaces (root, with iproute2's `ip`)."""
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Hosts:
    """A hub namespace (`hub`, `hub_ip`, a bridge) and worker namespaces (`workers`, `worker_ips`), each with a veth
    into the bridge; or, with `namespaces=False`, names None and every address 127.0.0.1."""

    def __init__(self, workers: int, namespaces: bool = True):
        self.namespaces = namespaces
        tag = secrets.token_hex(3)
        if namespaces:
            subnet = f"10.{random.randint(64, 127)}.{random.randint(0, 255)}"
            self.hub, self.hub_ip, self.bridge = f"cph{tag}", f"{subnet}.1", f"br{tag}"
            self.workers = [f"cpw{tag}{i}" for i in range(workers)]
            self.worker_ips = [f"{subnet}.{10 + i}" for i in range(workers)]
            self.links = [f"wv{tag}{i}" for i in range(workers)]  # the worker's end of its veth; the hub's: h<link>
        else:
            self.hub, self.hub_ip, self.bridge = None, LOOPBACK, None
            self.workers, self.worker_ips, self.links = [None] * workers, [LOOPBACK] * workers, [None] * workers
        self._made: list[str] = []
        self._black_holes: set[tuple[str, str]] = set()

    def __enter__(self) -> "Hosts":
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.delete()

    def create(self) -> None:
        if not self.namespaces:
            return
        for ns in [self.hub, *self.workers]:
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", self.hub, "link", "add", self.bridge, "type", "bridge")
        _ip("-n", self.hub, "addr", "add", f"{self.hub_ip}/24", "dev", self.bridge)
        _ip("-n", self.hub, "link", "set", self.bridge, "up")
        for ns, link, address in zip(self.workers, self.links, self.worker_ips):
            _ip("-n", self.hub, "link", "add", f"h{link}", "type", "veth", "peer", "name", link, "netns", ns)
            _ip("-n", self.hub, "link", "set", f"h{link}", "master", self.bridge)
            _ip("-n", self.hub, "link", "set", f"h{link}", "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", link)
            _ip("-n", ns, "link", "set", link, "up")

    def delete(self) -> None:
        """Removes the namespaces (a process still inside one keeps it alive until it exits)."""
        for ns in self._made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made.clear()

    def prefix(self, ns: "str | None") -> list[str]:
        """The command prefix that runs a program in namespace `ns` (empty on loopback)."""
        return ["ip", "netns", "exec", ns] if ns else []

    @contextlib.contextmanager
    def entered(self, ns: "str | None"):
        """Moves the calling thread into namespace `ns` (processes and threads it starts follow it) and back at the
        end; on loopback it does nothing."""
        if not ns:
            yield
            return
        libc = ctypes.CDLL(None, use_errno=True)

        def join(fd: int, name: str) -> None:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"cannot enter network namespace {name}: "
                              f"{os.strerror(ctypes.get_errno())}")

        with open("/proc/self/ns/net") as home, open(f"/var/run/netns/{ns}") as target:
            join(target.fileno(), ns)
            try:
                yield
            finally:
                join(home.fileno(), "of this process")

    def drop(self, worker: int, port: int, sender: "int | None" = None) -> None:
        """Drops the packets toward worker's port, sent by worker `sender` only, or by anyone (None). Filters sit
        where the packets are sent: a classifier on a bridge port does not see bridged packets' IP header."""
        match = ["match", "ip", "dst", f"{self.worker_ips[worker]}/32", "match", "ip", "dport", str(port), "0xffff"]
        places = [(self.workers[sender], self.links[sender])] if sender is not None else [
            (self.hub, f"h{self.links[worker]}"), *((ns, link) for i, (ns, link) in
                                                    enumerate(zip(self.workers, self.links)) if i != worker)]
        for ns, dev in places:
            self._black_hole(ns, dev)
            subprocess.run(["tc", "-n", ns, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                            "u32", *match, "flowid", "1:2"], check=True, capture_output=True)

    def _black_hole(self, ns: str, dev: str) -> None:
        """Egress of `dev`, once: a default class, and class 1:2 whose queue holds nothing (this kernel has no drop
        action): drop() sends packets there."""
        if (ns, dev) in self._black_holes:
            return
        for cmd in (["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
                    ["class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"],
                    ["class", "add", "dev", dev, "parent", "1:", "classid", "1:2", "htb", "rate", "10gbit"],
                    ["qdisc", "add", "dev", dev, "parent", "1:2", "handle", "20:", "pfifo", "limit", "0"]):
            subprocess.run(["tc", "-n", ns, *cmd], check=True, capture_output=True)
        self._black_holes.add((ns, dev))
