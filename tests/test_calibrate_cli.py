"""`cloudprofiler calibrate` between real processes: a serving responder, a live and a dead peer."""
import signal
import subprocess
import sys

import pyarrow as pa

CLI = [sys.executable, "-m", "cloudprofiler.cli"]


# 1 s per probe: a machine under load (a Spark suite beside) delays answers by tens of ms, and a probe answered
# after its timeout is not a probe of the table; the dead peer refuses at once, so it costs nothing there
def test_calibrate_writes_every_probe_and_reports_a_dead_peer(tmp_path):
    server = subprocess.Popen([*CLI, "calibrate", "--serve", "--address", "127.0.0.1", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().split(":")[-1].split()[0]
        out = tmp_path / "calibration.arrows"
        result = subprocess.run(
            [*CLI, "calibrate", f"127.0.0.1:{port}", "127.0.0.1:9", "--rounds", "2", "--gap", "0.1",
             "--timeout-ms", "1000", "--out", str(out)], capture_output=True, text=True, timeout=120)
    finally:
        server.send_signal(signal.SIGINT)
        rest, _ = server.communicate(timeout=30)
    assert result.returncode == 1
    assert f"127.0.0.1:{port}: MinRTT" in result.stdout and "bound e" in result.stdout
    assert "127.0.0.1:9: the probe responder at 127.0.0.1:9 refused" in result.stderr and "unbounded" in result.stderr
    with pa.OSFile(str(out)) as f:  # an Arrow IPC file, as every table the product writes
        table = pa.ipc.open_file(f).read_all()
    assert table.num_rows == 200 and set(table.column("peer").to_pylist()) == {f"127.0.0.1:{port}"}
    assert server.returncode == 0 and "answered 200 probes" in rest


def test_calibrate_names_a_bad_peer():
    result = subprocess.run([*CLI, "calibrate", "no-port-here"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "peer 'no-port-here' is not HOST:PORT" in result.stderr
