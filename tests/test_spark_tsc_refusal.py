"""A CPU without an invariant TSC (simulated: CLOUDPROFILER_SIMULATE_TSC=invariant=0) refuses calibration in a
real Spark application unless spark.cloudprofiler.calibration.force is set: the job runs, every task is logged,
one line names the reason and the option, and the records come out unbounded rather than wrong."""
import numpy as np

import cloudprofiler as cp
from cloudprofiler.calibration.spark import records_in_reference
from conftest import run_python


def _app(log_dir, force: bool):
    result = run_python(f"""
        import cloudprofiler.spark as cps
        spark = (cps.builder(log_dir={str(log_dir)!r}, calibration_force={force}).master("local[1]")
                 .config("spark.ui.enabled", "false").getOrCreate())
        print("sum", spark.sparkContext.parallelize(range(100), 2).sum())
        print("app", spark.sparkContext.applicationId)
        spark.stop()
        """, env={"CLOUDPROFILER_SIMULATE_TSC": "offset=0,invariant=0"}, timeout=300)
    assert "sum 4950" in result.stdout, result.stderr[-3000:]
    app = log_dir / result.stdout.split("app ")[1].split()[0]
    files = list(app.rglob("spark.task.start.*.arrows"))
    assert files, result.stderr[-3000:]
    return app, cp.log_metadata(files[0]), result.stderr


def test_without_an_invariant_tsc_calibration_is_refused_and_records_stay_unbounded(tmp_path):
    app, meta, stderr = _app(tmp_path, force=False)
    assert "spark.cloudprofiler.calibration.force=true to calibrate anyway" in stderr
    assert "invariant TSC" in stderr
    assert meta["tsc.domain"].endswith("#unchecked-driver") and "invariant TSC" in meta["tsc.domain.check"]
    assert meta["tsc.simulation"]["invariant"] is False
    records = records_in_reference(app, "spark.task.start")
    assert records.num_rows == 2 and np.isinf(records.column("tsc_err").to_numpy()).all()


def test_forced_calibration_places_the_executor_as_usual(tmp_path):
    """Forced, calibration goes on: the local executor joins the driver's domain (it runs in the driver's JVM)."""
    app, meta, stderr = _app(tmp_path, force=True)
    assert "calibrate anyway" not in stderr
    assert "shares the JVM of" in meta["tsc.domain.check"] and "#" not in meta["tsc.domain"]
    records = records_in_reference(app, "spark.task.start")
    assert records.num_rows == 2 and (records.column("tsc_err").to_numpy() == 0).all()


def test_with_spark_authenticate_nothing_derived_from_the_application_opens_the_responders(tmp_path):
    """With spark.authenticate on, the driver and its executor process still calibrate with the random secret the
    driver hands over Spark's (authenticated) RPC; probes tagged with a key derived from the application id and its
    authentication secret (spark.authenticate.secret: the old scheme), from the id alone, or with none, get no
    answer."""
    result = run_python(f"""
        import hashlib
        import cloudprofiler.spark as cps
        from cloudprofiler.calibration.probe import probe
        from cloudprofiler.calibration.spark import load_domains
        from cloudprofiler.errors import PeerTimeoutError
        spark = (cps.builder(log_dir={str(tmp_path)!r}).master("local-cluster[1,1,1024]")
                 .config("spark.ui.enabled", "false").config("spark.authenticate", "true")
                 .config("spark.authenticate.secret", "s3cret").getOrCreate())
        spark.sparkContext.parallelize(range(10), 2).sum()
        app = spark.sparkContext.applicationId
        domains = load_domains({str(tmp_path)!r} + "/" + app).to_pylist()
        host, port = next((d["host"], d["responder_port"]) for d in domains if d["role"] == "reference")
        for seed in (f"cloudprofiler:{{app}}:s3cret", "cloudprofiler:" + app, None):
            key = hashlib.sha256(seed.encode()).digest() if seed else b""
            try:  # where the driver's responder listens (Spark's driver address, not every interface)
                print("answered", len(probe(host, port, 20, timeout_ms=100, secret=key).send))
            except PeerTimeoutError:
                print("answered 0")
        print("checks", [d["check"] for d in domains if d["role"] != "reference"])
        spark.stop()
        """, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    answered = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("answered")]
    assert answered == [0, 0, 0], result.stdout
    assert "agrees with" in result.stdout  # the executor calibrated with the driver's secret
