"""`cloudprofiler config set|get --app <logDir>/<app id>` against a running local application: the real command in a
subprocess (rules at start from the option and a JSON rules file) switches a cp_trace channel of running jobs within
a second or two of being run (the driver looks for the request in the application's folder once a second), takes a
TOML rules file, refuses a bad rule with its message while the rules in force stay, and says so after a timeout,
leaving no request behind, once the application ended."""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps

CLI = [str(Path(sys.executable).with_name("cloudprofiler")), "config"]
SWITCH_SECONDS = 3.0  # the command's start (imports, about 1 s) + the driver's poll (at most 1 s) + the answer's


def config(*args):
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=os.environ)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    log_dir, files = tmp_path_factory.mktemp("cli-logs"), tmp_path_factory.mktemp("cli")
    rules_file, at_start = files / "rules.toml", files / "start.json"
    rules_file.write_text('[[rules]]\npattern = "cli"\nhandler = "downsample"\nparams = [4]\n')
    at_start.write_text('{"rules": [{"pattern": "cli", "handler": "buffered"}]}')
    spark = (cps.builder(log_dir=str(log_dir), local_dir=str(tmp_path_factory.mktemp("cli-local")),
                         rules="other=null", rules_file=str(at_start))
             .master("local[1]").config("spark.ui.enabled", "false").getOrCreate())
    folder = cps.log_folder(spark)
    stop, jobs = threading.Event(), []

    def sql_loop():
        while not stop.is_set():
            query = "select sum(t) from (select cp_trace('cli', id) as t from range(0, 2000, 1, 1))"
            jobs.append(spark.sql(query).collect()[0][0])

    worker = threading.Thread(target=sql_loop)
    worker.start()
    said = {}
    try:
        while not jobs and worker.is_alive():
            time.sleep(0.05)
        assert jobs, "the traced jobs failed"
        said["get"] = config("get", "--app", folder)
        for name, args in (("null", ["cli=null"]), ("bad", ["cli=nosuch"]), ("file", ["--file", str(rules_file)])):
            before = cp.tsc()
            said[name] = (config("set", "--app", folder, *args), before, cp.tsc())
            time.sleep(1.0)
        said["get_after"] = config("get", "--app", folder)
        said["rules"] = cps.rules(spark)
    finally:
        stop.set()
        worker.join()
        spark.stop()
    said["ended"] = config("get", "--app", folder, "--timeout", "2")
    segments = sorted((cp.log_metadata(cp.read_log(p)) for p in cp.log_files(folder) if p.name.startswith("cli.")),
                      key=lambda meta: meta["rules.segment"])
    return dict(folder=folder, said=said, segments=segments)


def test_get_prints_the_version_and_the_rules_in_force(run):
    assert run["said"]["get"] == (0, "version 0\nother=null\ncli=buffered", "")  # spark.cloudprofiler.rules, then
    # those of spark.cloudprofiler.rules.file
    assert run["said"]["get_after"] == (0, "version 2\ncli=downsample:4", "")
    assert run["said"]["rules"] == ["cli=downsample:4"]


def test_set_switches_the_running_channel_within_seconds(run):
    hz = cp.tsc_frequency().hz
    assert [meta["rules.rule"] for meta in run["segments"]] == ["cli=buffered", "cli=null", "cli=downsample:4"]
    for meta, name, version in zip(run["segments"][1:], ("null", "file"), (1, 2)):
        said, before, after = run["said"][name]
        assert said == (0, f"version {version}", "")
        assert before <= meta["switch.in"]["tsc"] <= after  # the command returned once the switch took place
        assert meta["switch.in"]["tsc"] - before <= SWITCH_SECONDS * hz


def test_a_bad_rule_is_refused_with_its_message_and_the_old_rules_stay(run):
    (code, out, err), _, _ = run["said"]["bad"]
    assert code == 2 and out == ""  # refused by the command itself, with the driver's own check
    assert "rules refused, the rules in force stay" in err and "line 1 'cli=nosuch': unknown handler 'nosuch'" in err
    assert [meta["rules.rule"] for meta in run["segments"]].count("cli=null") == 1  # no switch in between


def test_an_ended_application_gives_a_clear_error_after_the_timeout(run):
    code, out, err = run["said"]["ended"]
    assert code == 1 and out == ""
    assert f"no answer from the driver of {run['folder']} within 2 s" in err
    assert not (Path(run["folder"]) / "rules-request.txt").exists()
