"""`cloudprofiler calibrate` between real processes: a serving responder, a live and a dead peer."""
import re
import signal
import subprocess
import sys

import pyarrow as pa

CLI = [sys.executable, "-m", "cloudprofiler.cli"]


# 1 s per probe: a machine under load (a Spark suite beside) delays answers by tens of ms, and a probe answered
# after its timeout is not a probe of the table; the dead peer refuses at once, so it costs nothing there
def test_calibrate_writes_every_probe_and_reports_a_dead_peer(tmp_path):
    secret = tmp_path / "secret"
    server = subprocess.Popen([*CLI, "calibrate", "--serve", "--address", "127.0.0.1", "--port", "0",
                               "--secret-file", str(secret)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().startswith(f"a new secret written to {secret}")
        assert secret.stat().st_mode & 0o777 == 0o600 and len(secret.read_bytes()) == 65
        port = server.stdout.readline().split(":")[-1].split()[0]
        out = tmp_path / "calibration.arrows"
        result = subprocess.run(
            [*CLI, "calibrate", f"127.0.0.1:{port}", "127.0.0.1:9", "--rounds", "2", "--gap", "0.1",
             "--timeout-ms", "1000", "--out", str(out), "--secret-file", str(secret)],
            capture_output=True, text=True, timeout=120)
    finally:
        server.send_signal(signal.SIGINT)
        rest, _ = server.communicate(timeout=30)
    assert result.returncode == 1
    assert f"127.0.0.1:{port}: MinRTT" in result.stdout and "bound e" in result.stdout
    assert "127.0.0.1:9: the probe responder at 127.0.0.1:9 refused" in result.stderr and "unbounded" in result.stderr
    with pa.OSFile(str(out)) as f:  # an Arrow IPC file, as every table the product writes
        table = pa.ipc.open_file(f).read_all()
    assert table.num_rows == 200 and set(table.column("peer").to_pylist()) == {f"127.0.0.1:{port}"}
    answered = re.search(r"answered (\d+) probes", rest)  # 2 rounds of 100, and 100 more for each round taken again
    assert server.returncode == 0 and answered and int(answered[1]) >= 200 and int(answered[1]) % 100 == 0, rest


def test_calibrate_names_a_bad_peer():
    result = subprocess.run([*CLI, "calibrate", "no-port-here"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "peer 'no-port-here' is not HOST:PORT" in result.stderr


def test_serve_answers_only_probes_made_with_its_secret_which_it_makes_and_prints_when_not_given(tmp_path):
    server = subprocess.Popen([*CLI, "calibrate", "--serve", "--address", "127.0.0.1", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        said = server.stdout.readline().split()
        assert said[0] == "secret" and len(said[1]) == 64, said
        port = server.stdout.readline().split(":")[-1].split()[0]
        right, wrong = tmp_path / "right", tmp_path / "wrong"
        right.write_text(said[1] + "\n")
        wrong.write_text("0" * 64 + "\n")
        calibrate = [*CLI, "calibrate", f"127.0.0.1:{port}", "--rounds", "2", "--gap", "0", "--count", "5",
                     "--timeout-ms", "200", "--out", str(tmp_path / "c.arrows")]
        results = [subprocess.run(calibrate + extra, capture_output=True, text=True, timeout=60)
                   for extra in ([], ["--secret-file", str(wrong)], ["--secret-file", str(right)])]
    finally:
        server.send_signal(signal.SIGINT)
        rest, _ = server.communicate(timeout=30)
    without, with_wrong, with_right = results
    assert without.returncode != 0 and "give --secret-file" in without.stderr
    assert with_wrong.returncode == 1 and f"no answer from the probe responder at 127.0.0.1:{port}" in with_wrong.stderr
    assert with_right.returncode == 0 and f"127.0.0.1:{port}: MinRTT" in with_right.stdout, with_right.stderr
    # every probe of the right secret answered (2 rounds of 5, and 5 more for each round the prober took again
    # because its round trips were delayed), and the wrong secret's first probe refused: its peer failed there
    answered = re.search(r"answered (\d+) probes, rejected (\d+)", rest)
    assert answered and int(answered[1]) >= 10 and int(answered[1]) % 5 == 0 and answered[2] == "1", rest
