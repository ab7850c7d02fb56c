"""The aggregations the report makes on Spark itself (stage box statistics, the task sample of the timeline), on
DataFrames with the analysis API's columns and known values."""
import pandas as pd
import pytest
from pyspark.sql import SparkSession

from cloudprofiler.analysis.report import data

@pytest.fixture(scope="module")
def spark():
    session = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    yield session
    session.stop()


def _tasks(spark, rows):
    frame = pd.DataFrame(rows)
    for column in data.TASK_COLUMNS:
        if column not in frame:
            frame[column] = None
    schema = ("task_attempt_id long, job_id int, stage_id int, stage_attempt int, partition int, attempt_number int, "
              "executor_id string, host string, status string, failure_reason string, launch_time_ms long, "
              "finish_time_ms long, launch_t_ns double, finish_t_ns double, start_t_ns double, end_t_ns double, "
              "duration_ns double, err_ns double, unbounded boolean")
    return spark.createDataFrame(frame[data.TASK_COLUMNS], schema)


def test_stage_box_statistics_of_successful_bounded_attempts(spark):
    rows = [{"task_attempt_id": i, "stage_id": 4, "stage_attempt": 0, "status": "SUCCESS",
             "duration_ns": float((i + 1) * 1_000_000)} for i in range(100)]
    rows.append({"task_attempt_id": 100, "stage_id": 4, "stage_attempt": 0, "status": "FAILED", "duration_ns": 9e12})
    rows.append({"task_attempt_id": 101, "stage_id": 4, "stage_attempt": 0, "status": "SUCCESS", "duration_ns": None})
    rows.append({"task_attempt_id": 102, "stage_id": 4, "stage_attempt": 0, "status": "SUCCESS",
                 "duration_ns": float("nan")})
    [stats] = data._stage_durations(_tasks(spark, rows)).to_dict("records")
    assert stats["count"] == 100 and stats["min_ns"] == 1e6 and stats["max_ns"] == 100e6
    assert [stats[k] for k in ("p5_ns", "p25_ns", "p50_ns", "p75_ns", "p95_ns")] == [5e6, 25e6, 50e6, 75e6, 95e6]
    assert stats["mean_ns"] == pytest.approx(50.5e6)


def test_the_timeline_keeps_failed_and_retried_attempts_past_its_cap(spark, monkeypatch):
    monkeypatch.setattr(data, "TIMELINE_CAP", 60)
    rows = [{"task_attempt_id": i, "stage_id": 0, "stage_attempt": 0, "attempt_number": int(i % 50 == 7),
             "status": "FAILED" if i % 40 == 3 else "SUCCESS", "start_t_ns": 0.0, "end_t_ns": 1.0}
            for i in range(400)]
    kept, total = data._timeline_tasks(_tasks(spark, rows))
    assert total == 400 and 30 <= len(kept) <= 60
    marked = {i for i in range(400) if i % 50 == 7 or i % 40 == 3}
    assert marked <= set(kept["task_attempt_id"])
    assert kept["task_attempt_id"].is_unique
    few, total = data._timeline_tasks(_tasks(spark, rows[:50]))
    assert total == 50 and len(few) == 50


def test_throughput_period_is_round_and_gives_about_150_points():
    assert [data.throughput_period_ms(s * 1e9) for s in (0, 2, 24, 600, 3600)] == [1, 10, 200, 5000, 20000]


def test_trace_channels_are_record_channels_other_than_the_plugins_own():
    channels = pd.DataFrame({"channel": ["spark.task.start", "sink", "ingest", "source", "sink", "spark.python.udf",
                                         "spark.python.udfs", "spark.shuffle.partitions", "spark.operator.7"],
                             "kind": ["records", "records", "counters", "records", "records", "records", "records",
                                      "records", "records"]})
    assert data.trace_channels(channels) == ["sink", "source", "spark.python.udfs"]  # a user's name is a user's
