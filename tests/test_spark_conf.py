"""`cloudprofiler spark-conf` and the builder helper turn Python-friendly options into spark.cloudprofiler.* keys."""
import re
import subprocess
import sys

import pytest

import cloudprofiler.spark as cps


def test_channels_become_handler_and_params_keys():
    conf = cps.spark_conf(log_dir="/tmp/logs", channels={"after.join": ("downsample", 64), "ingest": ("mpc", [1000]),
                                                          "sink": "null"})
    assert conf["spark.cloudprofiler.channel.after.join.handler"] == "downsample"
    assert conf["spark.cloudprofiler.channel.after.join.params"] == "64"
    assert conf["spark.cloudprofiler.channel.ingest.params"] == "1000"
    assert conf["spark.cloudprofiler.channel.sink.handler"] == "null"
    assert "spark.cloudprofiler.channel.sink.params" not in conf


def test_rules_are_taken_as_set_rules_takes_them(tmp_path):
    """A text, a list of rules, or a JSON or TOML rules file's path, as one rules text for the driver."""
    toml = tmp_path / "rules.toml"
    toml.write_text('[[rules]]\npattern = "ysb.*"\nhandler = "downsample"\nparams = [64]\n\n'
                    '[[rules]]\npattern = "*"\nhandler = "null"\n')
    for rules in ("ysb.*=downsample:64\n*=null", ["ysb.*=downsample:64", "*=null"], toml):
        assert cps.spark_conf(rules=rules)["spark.cloudprofiler.rules"] == "ysb.*=downsample:64\n*=null"


@pytest.mark.parametrize("channels, message", [({"": "null"}, "got ''"), ({"a": (5,)}, "got 'a': (5,)")])
def test_bad_channel_specs_are_named(channels, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cps.spark_conf(channels=channels)


def test_spark_conf_command_prints_channel_flags_and_names_a_bad_one():
    command = [sys.executable, "-m", "cloudprofiler.cli", "spark-conf", "--log-dir", "/tmp/logs"]
    out = subprocess.run(command + ["--channel", "after-join=xoy:1,8", "--channel", "sink=null"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--conf spark.cloudprofiler.channel.after-join.handler=xoy" in out.stdout
    assert "--conf spark.cloudprofiler.channel.after-join.params=1,8" in out.stdout
    assert "--conf spark.cloudprofiler.channel.sink.handler=null" in out.stdout
    bad = subprocess.run(command + ["--channel", "after-join=xoy:one"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected NAME=HANDLER[:P,...], got 'after-join=xoy:one'" in bad.stderr
