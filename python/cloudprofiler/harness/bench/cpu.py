"""CPU seconds of processes, from /proc: what a bench counts beside the wall clock, which other work on a shared
machine sways far more."""
from __future__ import annotations

import os


def _stat(path: str) -> list[str]:
    with open(path) as f:
        return f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3, ppid 4, utime 14...


def stat_cpu_s(path: str) -> float:
    """The CPU seconds (user and system) a /proc stat file counts: /proc/<pid>/stat, all the process's threads, or
    /proc/<pid>/task/<tid>/stat, one thread."""
    fields = _stat(path)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """The CPU seconds process `pid` used so far, all its threads (user and system; /proc/<pid>/stat)."""
    return stat_cpu_s(f"/proc/{pid}/stat")


def tree_cpu_s(pid: int) -> float:
    """The CPU seconds process `pid` and all its descendants used so far (a JVM and its Python workers), those
    that ended and were waited for included (their parents' cutime and cstime): a difference of two readings is
    the tree's CPU meanwhile, processes that started or ended in between included."""
    parents, ticks = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = _stat(f"/proc/{entry}/stat")
            except OSError:  # it ended while we looked
                continue
            parents[int(entry)] = int(fields[1])
            ticks[int(entry)] = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    tree, frontier = {pid}, [pid]
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            tree.add(child)
            frontier.append(child)
    return sum(ticks.get(p, 0) for p in tree) / os.sysconf("SC_CLK_TCK")
