"""The plugin's options are declared once, in its Config.java, which writes them into the jar; the Python helper
reads them from there, and the README's table and the native library's own ranges must agree with them. So are its
tables, each beside its writer (Tables.java lists them), which the README's list of tables must name."""
import re
from pathlib import Path

import cloudprofiler.spark as cps
from cloudprofiler import tables
from cloudprofiler.spark.jar import option_table
from conftest import run_python

ROOT = Path(__file__).resolve().parent.parent


def _readme_options() -> dict[str, str]:
    """key -> default, from the README's table of options (a row may give a key and its `.params` sibling)."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Spark plugin options"):].split("\n\n")[1]
    out = {}
    for row in table.splitlines()[2:]:
        key_cell, default_cell, _ = row.strip("|").split("|", 2)
        keys = re.findall(r"`([^`]+)`", key_cell)
        defaults = [d.strip().strip("`") for d in default_cell.split(" / ")]
        if keys[0].startswith("spark.cloudprofiler.channel.<name>"):
            continue  # the trace channels' keys, not options of their own
        if len(keys) == 2:  # `...task.handler` / `.params`
            keys[1] = keys[0].rsplit(".", 1)[0] + keys[1]
        for key, default in zip(keys, defaults):
            out[key] = "" if default in ("empty", "unset") else default
    return out


def test_the_readme_lists_every_option_with_its_default():
    declared = {o["key"]: o["default"] for o in option_table()["options"]}
    assert _readme_options() == declared


def test_the_readme_lists_every_table_the_jar_declares_with_its_file_and_folder():
    text = (ROOT / "README.md").read_text()
    rows = text[text.index("\nTables: beside the log files"):].split("\n\n")[1].splitlines()[2:]
    listed = [tuple(cell.strip().strip("`") for cell in row.strip("|").split("|")[:3]) for row in rows]
    assert listed == [(t.id, t.file, t.folder) for t in tables.tables().values()]


def test_the_python_helper_offers_every_option_under_its_python_name():
    conf = cps.spark_conf(log_dir="/l", local_dir="/d", collect_interval_seconds=5, calibration_timeout_ms=50,
                          channel_blocks=4, native_path="/n.so")
    assert {k: conf[k] for k in conf if k.startswith("spark.cloudprofiler.")} == {
        "spark.cloudprofiler.logDir": "/l", "spark.cloudprofiler.localDir": "/d",
        "spark.cloudprofiler.collect.intervalSeconds": "5", "spark.cloudprofiler.calibration.timeoutMs": "50",
        "spark.cloudprofiler.channelBlocks": "4", "spark.cloudprofiler.native.path": "/n.so"}
    assert set(cps.options().values()) == {o["key"] for o in option_table()["options"]}


def test_the_channel_blocks_range_is_the_native_library_s():
    (blocks,) = [o for o in option_table()["options"] if o["key"] == "spark.cloudprofiler.channelBlocks"]
    result = run_python("""
        import tempfile, cloudprofiler as cp
        try:
            cp.start(tempfile.mkdtemp(), channel_blocks=1)
        except cp.InvalidArgumentError as e:
            print(e)
        """)
    assert f"channel_blocks=1 is out of range: expected {blocks['min']} to {blocks['max']}" in result.stdout, result


def test_the_roll_size_its_default_and_range_are_the_native_library_s():
    (roll,) = [o for o in option_table()["options"] if o["key"] == "spark.cloudprofiler.roll.bytes"]
    result = run_python("""
        import os, tempfile, cloudprofiler as cp
        from cloudprofiler.native import ffi, lib
        print(lib.CP_ROLL_BYTES_DEFAULT)
        for roll in (65535, None):
            if roll is None:
                os.environ["CLOUDPROFILER_ROLL_BYTES"] = "1e6"
            try:
                cp.start(tempfile.mkdtemp(), roll_bytes=roll)
            except cp.InvalidArgumentError as e:
                print(e)
        """)
    default, refused, from_environment = result.stdout.splitlines()
    assert default == roll["default"]
    assert refused.endswith(f"roll_bytes=65535 is out of range: expected {roll['expected']}"), refused
    assert from_environment.endswith(f"CLOUDPROFILER_ROLL_BYTES='1e6' is invalid: expected {roll['expected']}")
