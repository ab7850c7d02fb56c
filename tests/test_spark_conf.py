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


@pytest.mark.parametrize("master, in_place", [
    ("local", True), ("local[2]", True), ("local[*]", True), ("local[4,2]", True), ("local-cluster[2,1,1024]", True),
    (None, False), ("spark://host:7077", False), ("yarn", False), ("k8s://https://host:443", False),
    ("localhost", False), ("local2", False)])
def test_executors_read_the_jar_in_place_only_where_all_run_on_this_machine(master, in_place):
    jar = cps.spark_conf(master=master)["spark.jars"]
    assert jar == (f"local:{cps.jar_path()}" if in_place else cps.jar_path())


def test_the_builder_helper_names_the_jar_by_the_builder_s_master_and_once():
    from pyspark.sql import SparkSession

    def jars(master, before):
        builder = SparkSession.builder.master(master).config("spark.jars", before)
        return cps.configure(builder, log_dir="/tmp/logs")._options["spark.jars"]

    ours = cps.jar_path()
    assert jars("local[2]", "/other/a.jar") == f"/other/a.jar,local:{ours}"
    assert jars("spark://host:7077", "/other/a.jar") == f"/other/a.jar,{ours}"
    for named in (ours, f"file://{ours}", f"local:{ours}"):  # named already, in whatever form: kept as it is
        assert jars("local[2]", f"{named},/other/a.jar") == f"{named},/other/a.jar"


def test_spark_conf_command_names_the_jar_by_the_master_it_is_given():
    command = [sys.executable, "-m", "cloudprofiler.cli", "spark-conf"]
    jars = {}
    for master in (["--master", "local[4]"], ["--master", "yarn"], []):
        out = subprocess.run(command + master, capture_output=True, text=True, timeout=60, check=True)
        (line,) = [line for line in out.stdout.splitlines() if line.startswith("--jars")]
        jars[" ".join(master)] = line.split()[1]
    assert jars == {"--master local[4]": f"local:{cps.jar_path()}", "--master yarn": cps.jar_path(),
                    "": cps.jar_path()}


@pytest.mark.parametrize("channels, message", [({"": "null"}, "got ''"), ({"a": (5,)}, "got 'a': (5,)")])
def test_bad_channel_specs_are_named(channels, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cps.spark_conf(channels=channels)


def test_spark_conf_command_prints_channel_flags_and_names_a_bad_one():
    command = [sys.executable, "-m", "cloudprofiler.cli", "spark-conf", "--log-dir", "/tmp/logs"]
    out = subprocess.run(command + ["--channel", "after-join=xoy:1:8", "--channel", "sink=null"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--conf spark.cloudprofiler.channel.after-join.handler=xoy" in out.stdout
    assert "--conf spark.cloudprofiler.channel.after-join.params=1,8" in out.stdout
    assert "--conf spark.cloudprofiler.channel.sink.handler=null" in out.stdout
    bad = subprocess.run(command + ["--channel", "after-join=xoy:one"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "'after-join=xoy:one': parameter 'one' is not an integer" in bad.stderr


@pytest.mark.parametrize("values, named", [
    ({"compression": "lz4"}, "spark.cloudprofiler.compression=lz4 is invalid: expected none or zstd"),
    ({"channel_blocks": -3}, "spark.cloudprofiler.channelBlocks=-3 is invalid: expected an integer from 2 to 65536"),
    ({"task_enabled": "yes"}, "spark.cloudprofiler.task.enabled=yes is invalid"),
    ({"rules": "x=bogus"}, "spark.cloudprofiler.rules=x=bogus is invalid: rule at line 1 'x=bogus': unknown handler"),
    ({"channels": {"x": ("downsample", 0)}}, "spark.cloudprofiler.channel.x.params=0 is invalid: downsample n=0"),
    ({"channels": {"x": "downsampel"}}, "spark.cloudprofiler.channel.x.handler=downsampel is invalid"),
])
def test_the_builder_helper_checks_values_before_the_jvm_starts(values, named):
    """The driver's own checks (option kinds from the jar's table, handlers and rules by the native library), made
    where the values are given: the same message the driver gave 4-5 s into the application."""
    from pyspark.sql import SparkSession

    import cloudprofiler as cp

    with pytest.raises(cp.InvalidArgumentError, match=re.escape(named)):
        cps.configure(SparkSession.builder, **values)
    with pytest.raises(cp.InvalidArgumentError, match=re.escape(named)):
        cps.spark_conf(**values)


def test_the_builder_helper_checks_what_the_builder_has_already():
    from pyspark.sql import SparkSession

    import cloudprofiler as cp

    builder = SparkSession.builder.config("spark.cloudprofiler.task.handler", "xoy")
    with pytest.raises(cp.InvalidArgumentError, match=re.escape("spark.cloudprofiler.task.params= is invalid: "
                                                                "handler xoy takes 2 parameter(s), got 0")):
        cps.configure(builder, log_dir="/tmp/logs")
    builder.config("spark.cloudprofiler.task.params", "1,4")
    cps.configure(builder, log_dir="/tmp/logs")  # the handler with its parameters: accepted
