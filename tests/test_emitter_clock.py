"""Whose TSC a generator emitter stamps, and where the analysis places the emissions that readers log: the emitter's
info reply names its clock (its boot id and TSC simulation, as log files name their writer's), and DomainResolver
puts a file of such values in the domain of the application's processes that read that clock."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler import tables
from cloudprofiler.calibration.spark import DomainResolver
from cloudprofiler.clock import tsc_identity
from cloudprofiler.harness.generator.fetch import EmitterClient
from cloudprofiler.harness.maxtput import free_port_base

SIMULATION = {"offset": 3_600_000_000, "skew_ppm": -12.5, "invariant": True}
CLAIM = tables.channel("source_rows").keys


def test_an_emitter_names_the_clock_of_its_stamps_simulation_included():
    port = free_port_base(1)
    emitter = subprocess.Popen(
        [str(Path(sys.executable).parent / "cloudprofiler"), "generate", "--serve", "--rate", "1000", "--duration",
         "1", "--port", str(port), "--timeout", "20"],
        env={**os.environ, "CLOUDPROFILER_SIMULATE_TSC": "offset=3600000000,skew_ppm=-12.5"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with EmitterClient(f"tcp://127.0.0.1:{port}", timeout_s=2) as client:
                    clock = client.info()["clock"]
                break
            except Exception:
                assert time.monotonic() < deadline and emitter.poll() is None, emitter.stderr.read()[-2000:]
                time.sleep(0.2)
    finally:
        emitter.kill()
        emitter.wait()
    assert clock == {"boot_id": tsc_identity()["boot_id"], "simulation": SIMULATION}
    assert tsc_identity()["simulation"] is None  # this process reads the machine's TSC


def _file(boot: str, simulation, **meta) -> dict:
    """A log file's metadata as log_metadata gives it (tsc.simulation parsed)."""
    return {"boot_id": boot, "tsc.simulation": simulation, **meta}


def _claim(boot: str, simulation: str) -> dict:
    """The metadata of a file of emissions logged by an executor (pid 20) of another clock's stamps."""
    return _file("b1", SIMULATION, pid=20, **{CLAIM["clock_boot_id"]: boot, CLAIM["clock_simulation"]: simulation})


def test_emissions_are_placed_in_the_domain_of_the_processes_that_read_their_clock():
    """Known answers: the driver (in tsc-domains.arrows with no simulation) is the only reader of this machine's TSC;
    the executors (their files, simulated) of theirs; a clock that two domains read, or none, places nothing."""
    domains = pa.Table.from_pylist([
        {"domain": "b1", "boot_id": "b1", "executor_id": "driver", "pid": 10, "tsc_simulation": "null"},
        {"domain": "b1#1", "boot_id": "b1", "executor_id": "0", "pid": 20, "tsc_simulation": None}])
    executor = _file("b1", SIMULATION, pid=20, **{"tsc.domain": "b1#1"})
    claims = [_claim("b1", "null"), _claim("b1", '{"skew_ppm": -12.5, "offset": 3600000000, "invariant": true}'),
              _claim("b2", "null"), _claim("b1", "{not json")]
    resolver = DomainResolver(domains, {}, [executor, *claims])
    assert [resolver.of(c) for c in claims] == ["b1", "b1#1", None, None]
    assert resolver.of(executor) == "b1#1"  # a file of the writer's own values: its own domain
    # a second domain whose processes read the machine's TSC (another executor, not simulated): which one is unknown
    other = _file("b1", None, pid=30, **{"tsc.domain": "b1#2"})
    assert DomainResolver(domains, {}, [executor, other, claims[0]]).of(claims[0]) is None
    # without calibration (no domains table) a machine's files are one domain, its boot id
    uncalibrated = DomainResolver(None, {}, [_file("b1", None, pid=10), claims[0]])
    assert uncalibrated.of(claims[0]) == "b1"


def _stream(spark, checkpoint: Path, clock) -> None:
    """A second of the generator into a query with its operators timed, the emitters stating `clock`."""
    import cloudprofiler.clock
    from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
    from cloudprofiler.harness.trial import stop_query

    stated, cloudprofiler.clock.tsc_identity = cloudprofiler.clock.tsc_identity, lambda: clock  # the forked emitters'
    try:
        generator = Generator(GeneratorConfig(rate=20_000, duration_s=1, emitters=1, transport="serve",
                                              port=free_port_base(1), timeout_s=30)).start()
    finally:
        cloudprofiler.clock.tsc_identity = stated
    query = (cps.read_generator(spark, generator.endpoints, timeout=10).select("id").writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).start())
    assert [r.error for r in generator.join(120)] == [None]
    stop_query(spark, query)


def test_emissions_on_a_clock_stated_amiss_are_not_logged_and_on_a_foreign_one_stay_unbounded(tmp_path):
    """An emitter's clock goes into log files' metadata: a boot id that is no id, or a simulation that is no JSON
    object, is refused and its emissions are not logged (the delivery is); a well-formed clock of a machine where no
    process of the application runs is logged with its claim, which the analysis places nowhere."""
    from cloudprofiler.analysis import open_application

    spark = (cps.builder(log_dir=str(tmp_path / "logs"), local_dir=str(tmp_path / "local"), calibration_enabled=False)
             .master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
    try:
        spark.conf.set("spark.cloudprofiler.operators", "true")
        for n, clock in enumerate([{"boot_id": "../../etc/passwd", "simulation": None},
                                   {"boot_id": "b1", "simulation": [1, 2]}]):
            _stream(spark, tmp_path / f"amiss-{n}", clock)
        app_id = spark.sparkContext.applicationId
        folder = tmp_path / "logs" / app_id
        _stream(spark, tmp_path / "foreign", {"boot_id": "00000000-0000-0000-0000-000000000000", "simulation": None})
    finally:
        spark.stop()
    source = tables.channel("source_rows")
    metas = [cp.log_metadata(p) for p in folder.rglob(source.prefix + "*.arrows")]
    emitted = [m for m in metas if m["channel.name"] == source.prefix + "emitted"]
    assert [m[CLAIM["clock_boot_id"]] for m in emitted] == ["00000000-0000-0000-0000-000000000000"]
    assert len([m for m in metas if m["channel.name"] == source.prefix + "delivered"]) == 1
    latency = open_application(str(folder)).source_latency().toPandas()
    assert set(latency["source"]) == {"delivered"}  # from the foreign clock's emission: nothing bounded
