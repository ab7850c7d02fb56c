"""Bad input gives a clear error naming the value, or a counted no-op; never a crash."""
import numpy as np
import pytest

import cloudprofiler as cp
from conftest import run_python


def test_unknown_handler_names_the_value(log_dir):
    with pytest.raises(cp.InvalidArgumentError, match="unknown handler 'fastest'"):
        cp.Channel("c", "fastest")
    with pytest.raises(cp.InvalidArgumentError, match="unknown handler 99"):
        cp.Channel("c", 99)


@pytest.mark.parametrize(
    "handler,params,message",
    [
        ("xoy", (5, 3), "xoy x=5 is out of range"),
        ("xoy", (0, 0), "xoy y=0 is out of range"),
        ("downsample", (0,), "downsample n=0 is out of range"),
        ("spc", (10,), "spc period_ns=10 is out of range"),
        ("buffered", (1,), "takes 0 parameter"),
        ("xoy", (1,), "takes 2 parameter"),
    ],
)
def test_parameters_out_of_range_name_the_value(log_dir, handler, params, message):
    with pytest.raises(cp.InvalidArgumentError, match=message):
        cp.Channel("bad", handler, params)
    with pytest.raises(cp.InvalidArgumentError, match=message):  # the same check, with no channel opened
        cp.Handler.parse(handler).check(params)


def test_the_handler_check_passes_what_a_channel_opens_with():
    for handler, params in [("buffered", ()), ("downsample", (1,)), ("xoy", (0, 1)), ("spc", (1000,))]:
        cp.Handler.parse(handler).check(params)


def test_parameterize_out_of_range_keeps_the_channel_working(log_dir):
    with cp.Channel("param", "downsample", (2,)) as ch:
        with pytest.raises(cp.InvalidArgumentError, match="n=-1"):
            ch.parameterize(0, -1)
        with pytest.raises(cp.InvalidArgumentError, match="index 3"):
            ch.parameterize(3, 1)
        ch.log_many(np.arange(10))
    assert cp.read_log(ch.path).column("tuple_id").to_pylist() == [0, 2, 4, 6, 8]


def test_double_close_raises_and_log_after_close_is_counted(log_dir):
    ch = cp.Channel("closed", "buffered")
    ch.log(1)
    ch.close()
    with pytest.raises(cp.ClosedError, match="already closed"):
        ch.close()
    ch.log(2)
    ch.log_many(np.arange(5))
    assert ch.stats.after_close == 6
    with pytest.raises(cp.ClosedError):
        ch.flush()
    assert cp.read_log(ch.path).column("tuple_id").to_pylist() == [1]


def test_non_integer_ids_are_refused(log_dir):
    with cp.Channel("types", "buffered") as ch:
        with pytest.raises(cp.InvalidArgumentError, match="dtype float64"):
            ch.log_many(np.array([1.5, 2.5]))

    with cp.Channel("one-by-one", "buffered") as ch:
        for bad, error, message in [
            ("7", TypeError, "must be an integer, got '7'"),
            (1.5, TypeError, "got 1.5"),
            (None, TypeError, "got None"),
            (2**63, OverflowError, "9223372036854775808 is outside the int64 range"),
            (-(2**63) - 1, OverflowError, "-9223372036854775809 is outside"),
        ]:
            with pytest.raises(error, match=message):
                ch.log(bad)
        ch.log(2**63 - 1)
        ch.log(-(2**63))
        ch.log(np.int64(5))
    assert cp.read_log(ch.path).column("tuple_id").to_pylist() == [2**63 - 1, -(2**63), 5]


def test_starting_twice_says_where_it_logs(log_dir):
    with pytest.raises(cp.CloudProfilerError, match="already started"):
        cp.start(str(log_dir))


def test_unwritable_folder_names_the_path(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run_python(
        """
        import cloudprofiler as cp
        try:
            cp.Channel("x", "buffered")
        except cp.CloudProfilerError as exc:
            print(type(exc).__name__, exc)
        """,
        env={"CLOUDPROFILER_LOG_DIR": str(blocker / "logs")},
    )
    assert result.returncode == 0, result.stderr
    assert "LogFolderNotFoundError" in result.stdout and str(blocker / "logs") in result.stdout


def test_bad_option_values_name_the_option(tmp_path):
    result = run_python(
        f"""
        import cloudprofiler as cp
        for kwargs in ({{"compression": "lz5"}}, {{"block_records": 3}}, {{"full_policy": "wait"}},
                       {{"tsc_read": "fenced"}}):
            try:
                cp.start({str(tmp_path)!r}, **kwargs)
            except (ValueError, cp.CloudProfilerError) as exc:
                print(exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "compression='lz5'" in result.stdout
    assert "block_records=3 is out of range" in result.stdout
    assert "full_policy='wait'" in result.stdout
    assert "tsc_read='fenced' is not one of ordered, unordered" in result.stdout


def test_malformed_simulation_variable_is_reported_not_fatal(tmp_path):
    result = run_python(
        "import cloudprofiler as cp; print(cp.tsc() > 0)",
        env={"CLOUDPROFILER_SIMULATE_TSC": "offset=banana"},
    )
    assert result.returncode == 0 and result.stdout.strip() == "True"
    assert "CLOUDPROFILER_SIMULATE_TSC=offset=banana" in result.stderr


def test_simulated_offset_below_zero_is_refused_instead_of_wrapping():
    behind = -(cp.tsc() + 10**15)  # a host booted later than this one by more than this one's uptime
    result = run_python(
        "import cloudprofiler as cp; print(cp.tsc() < 2**63)",
        env={"CLOUDPROFILER_SIMULATE_TSC": f"offset={behind},skew_ppm=0"},
    )
    assert result.returncode == 0 and result.stdout.strip() == "True"
    assert f"offset={behind} would put the TSC below zero" in result.stderr
