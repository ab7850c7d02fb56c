"""Cluster phase (`--cluster`): a standalone master and two workers on this machine. Run as root, each worker is a
host of its own (a network namespace on a bridge; the master, the driver and the generator in the hub); otherwise
they share loopback. Either way each worker's executors read a simulated TSC, hours and tens of ppm away from the
driver's and from each other's: the hosts share one physical TSC, which calibration would find equal to the
driver's, so without it there would be no cross-host bound to show."""
from __future__ import annotations

import contextlib
from pathlib import Path

from .session import EXECUTORS, Placement, simulated_tsc

WORKER_SIMULATIONS = [(3.0, 31.0), (-2.0, -44.0)]  # per worker: hours ahead of the driver, ppm fast


@contextlib.contextmanager
def started(folder: Path):
    """Yields the cluster's Placement; the calling thread runs in the hub host meanwhile, so the driver, its Python
    workers and the generator, started from it, live there."""
    from cloudprofiler.harness.hosts import Hosts, namespaces_available
    from cloudprofiler.harness.standalone import standalone_cluster

    folder.mkdir(parents=True, exist_ok=True)
    namespaces = namespaces_available()
    envs, whats = zip(*(simulated_tsc(hours, skew) for hours, skew in WORKER_SIMULATIONS[:EXECUTORS]))
    with Hosts(EXECUTORS, namespaces) as hosts, standalone_cluster(hosts, folder, list(envs)) as master, \
            hosts.entered(hosts.hub):
        where = (f"network namespaces on one machine, joined by a bridge: the hub {hosts.hub_ip} (master, driver, "
                 f"generator), workers {', '.join(hosts.worker_ips)}" if namespaces else
                 "on loopback, every one this machine (run as root for a network namespace per host)")
        yield Placement(master, hosts.hub_ip, master, simulated=[
            f"hosts: {where}",
            f"TSC domains: each worker's executors read a simulated TSC ({'; '.join(whats)} from the driver's; "
            f"CLOUDPROFILER_SIMULATE_TSC), because the hosts share one physical TSC"])
