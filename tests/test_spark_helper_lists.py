"""The helper adds the plugin to spark.jars, spark.plugins and spark.sql.extensions that the user or another tool
(Delta Lake's extension, another plugin and its jar) set already: theirs survive, and a job runs with both plugins
and both extensions."""
import subprocess
import textwrap

import pytest

import cloudprofiler.spark as cps
from conftest import run_python

# another tool's plugin and SQL extension: each leaves a file in $OTHER_MARKERS when Spark starts it
OTHER = {
    "OtherPlugin": """
        package other;
        import java.util.Map;
        import org.apache.spark.SparkContext;
        import org.apache.spark.api.plugin.*;
        public class OtherPlugin implements SparkPlugin {
          public DriverPlugin driverPlugin() {
            return new DriverPlugin() {
              public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                Marker.leave("plugin");
                return Map.of();
              }
            };
          }
          public ExecutorPlugin executorPlugin() { return null; }
        }""",
    "DeltaLikeExtensions": """
        package other;
        import org.apache.spark.sql.SparkSessionExtensions;
        import scala.runtime.BoxedUnit;
        public class DeltaLikeExtensions implements scala.Function1<SparkSessionExtensions, BoxedUnit> {
          public BoxedUnit apply(SparkSessionExtensions extensions) {
            Marker.leave("extensions");
            return BoxedUnit.UNIT;
          }
        }""",
    "Marker": """
        package other;
        import java.nio.file.*;
        final class Marker {
          static void leave(String name) {
            try {
              Files.writeString(Path.of(System.getenv("OTHER_MARKERS"), name), name);
            } catch (java.io.IOException e) {
              throw new RuntimeException(e);
            }
          }
        }""",
}


@pytest.fixture(scope="module")
def other_jar(tmp_path_factory):
    import pyspark

    folder = tmp_path_factory.mktemp("other")
    for name, source in OTHER.items():
        (folder / f"{name}.java").write_text(textwrap.dedent(source))
    jars = f"{pyspark.__path__[0]}/jars/*"
    subprocess.run(["javac", "--release", "17", "-cp", jars, "-d", str(folder / "classes"),
                    *map(str, folder.glob("*.java"))], check=True, capture_output=True, timeout=300)
    subprocess.run(["jar", "--create", "--file", str(folder / "other.jar"), "-C", str(folder / "classes"), "."],
                   check=True, timeout=60)
    return folder / "other.jar"


def test_lists_set_on_the_builder_keep_theirs_and_get_ours():
    from pyspark.sql import SparkSession

    builder = (SparkSession.Builder().master("spark://host:7077")
               .config("spark.jars", "/opt/delta.jar,/opt/measure.jar")
               .config("spark.plugins", "other.OtherPlugin").config("spark.sql.extensions", "other.Ext"))
    conf = cps.configure(builder, log_dir="/tmp/logs")._options
    assert conf["spark.jars"] == f"/opt/delta.jar,/opt/measure.jar,{cps.jar_path()}"
    assert conf["spark.plugins"] == f"other.OtherPlugin,{cps.PLUGIN_CLASS}"
    assert conf["spark.sql.extensions"] == f"other.Ext,{cps.EXTENSIONS_CLASS}"
    again = cps.configure(builder, log_dir="/tmp/logs")._options  # twice: ours once
    assert again["spark.plugins"] == f"other.OtherPlugin,{cps.PLUGIN_CLASS}"


def test_lists_of_spark_defaults_conf_are_kept(tmp_path, monkeypatch):
    (tmp_path / "spark-defaults.conf").write_text("# a platform's defaults\nspark.sql.extensions  other.Ext\n"
                                                  "spark.plugins=other.OtherPlugin\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_jvm", None)  # as before the JVM starts, which reads the same file
    from pyspark.sql import SparkSession

    conf = cps.configure(SparkSession.Builder())._options
    assert conf["spark.sql.extensions"] == f"other.Ext,{cps.EXTENSIONS_CLASS}"
    assert conf["spark.plugins"] == f"other.OtherPlugin,{cps.PLUGIN_CLASS}"


def test_the_analysis_session_keeps_the_jars_of_spark_defaults_conf(tmp_path, monkeypatch):
    """The embedded session's spark.jars replace spark-defaults.conf's: it keeps them (a platform's s3a jars)
    beside the plugin jar, whose reader it uses; jars given to it replace the file's, as spark-submit's --conf."""
    from pyspark.sql import SparkSession

    from cloudprofiler.analysis.session import _with_plugin_jar

    (tmp_path / "spark-defaults.conf").write_text("spark.jars /opt/hadoop-aws.jar,/opt/sdk.jar\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setattr(SparkSession.Builder, "_options", {}, raising=False)  # no builder of this process set any
    assert _with_plugin_jar() == f"/opt/hadoop-aws.jar,/opt/sdk.jar,{cps.jar_path()}"
    assert _with_plugin_jar("/opt/given.jar") == f"/opt/given.jar,{cps.jar_path()}"


def test_a_job_runs_with_both_plugins_and_both_extensions(other_jar, tmp_path):
    """In a process of its own: the driver's class path is fixed when its JVM starts."""
    markers, logs = tmp_path / "markers", tmp_path / "logs"
    markers.mkdir()
    run = run_python(f"""
        import cloudprofiler.spark as cps
        from pyspark.sql import SparkSession
        builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                   .config("spark.jars", {str(other_jar)!r}).config("spark.plugins", "other.OtherPlugin")
                   .config("spark.sql.extensions", "other.DeltaLikeExtensions"))
        spark = cps.configure(builder, log_dir={str(logs)!r}, calibration_enabled=False).getOrCreate()
        conf = spark.sparkContext.getConf()
        print("jars", conf.get("spark.jars"))
        print("plugins", conf.get("spark.plugins"))
        print("extensions", conf.get("spark.sql.extensions"))
        print("traced", spark.sql("select sum(t) from (select cp_trace('c', id) as t from range(100))").first()[0])
        print("app", spark.sparkContext.applicationId)
        spark.stop()
        """, env={"OTHER_MARKERS": str(markers)}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    assert out["jars"] == f"{other_jar},local:{cps.jar_path()}"  # a local master: read in place
    assert out["plugins"] == f"other.OtherPlugin,{cps.PLUGIN_CLASS}"
    assert out["extensions"] == f"other.DeltaLikeExtensions,{cps.EXTENSIONS_CLASS}"
    assert sorted(p.name for p in markers.iterdir()) == ["extensions", "plugin"]
    assert out["traced"] == str(sum(range(100)))  # our extension's cp_trace
    assert list((logs / out["app"]).glob("*/c.*.arrows"))  # our plugin's executor collected the trace channel
