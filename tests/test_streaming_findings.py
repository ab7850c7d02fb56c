"""The streaming section's findings on known batch series (no Spark): a query whose batches grew slower is named with
the operator that grew most, a steady one is not; one that processed fewer rows per second than arrived in most of
its latest batches does not keep up; a query of too few batches gets no verdict."""
import pandas as pd

from cloudprofiler.analysis.report import streaming
from cloudprofiler.analysis.report.data import ReportData
from cloudprofiler.analysis.report.findings import Finding


def _batches(times_ms, processed=None, arrived=100.0, name="q"):
    n = len(times_ms)
    return pd.DataFrame({
        "query_id": "id-1", "run_id": "run-1", "query_name": name, "batch_id": range(n),
        "trigger_start_ms": [1_000 * i for i in range(n)], "trigger_execution_ms": times_ms,
        "num_input_rows": 100, "input_rows_per_second": arrived,
        "processed_rows_per_second": processed if processed is not None else [2 * arrived] * n})


def _found(batches, trends=None):
    data = ReportData(summary={"span_ns": 60e9})
    data.batches = batches
    data.batch_trends = trends if trends is not None else pd.DataFrame()
    return [(f.kind, f.text) for f in streaming.findings(data, Finding)]


def test_a_query_whose_latest_batches_took_longer_is_named_with_the_operator_that_grew_most():
    times = [5_000] + [200] * 10 + [900] * 10  # batch 0 (start-up) is left out of the comparison
    trends = pd.DataFrame({"query_id": "id-1", "position": [1, 2], "operator": ["HashAggregate", "Sort"],
                           "first_s": [0.05, 0.10], "latest_s": [0.06, 0.75]})
    [(kind, text)] = _found(_batches(times), trends)
    assert kind == "streaming_slower"
    assert text == ("The streaming query `q`'s batches grew slower: from 200 ms a batch (batches 1-10) to 900 ms "
                    "(batches 11-20): Sort (operator 2 of its plan) grew most, from 100 ms to 750 ms a batch.")


def test_steady_or_barely_slower_batches_are_no_finding():
    assert _found(_batches([5_000] + [200] * 20)) == []
    assert _found(_batches([5_000] + [200] * 10 + [280] * 10)) == []  # 1.4 x: under GREW
    assert _found(_batches([5_000] + [20] * 10 + [100] * 10)) == []  # 5 x, but only 80 ms more


def test_a_query_that_processes_slower_than_rows_arrive_does_not_keep_up():
    processed = [200.0] * 11 + [60.0] * 8 + [200.0] * 2  # slower than the 100 rows/s arriving in 8 of the last 10
    [(kind, text)] = _found(_batches([100] * 21, processed))
    assert kind == "streaming_behind"
    assert text == ("The streaming query `q` does not keep up with its input: in 8 of its latest 10 batches it "
                    "processed fewer rows per second than arrived (median 60 against 100).")
    half = [200.0] * 16 + [60.0] * 5  # 5 of 10: not most of them
    assert _found(_batches([100] * 21, half)) == []


def test_a_query_of_three_batches_gets_no_verdict():
    assert streaming.trend_windows(_batches([100, 900, 900])) == (None, None)
    assert _found(_batches([100, 100, 900], [1.0] * 3)) == []
    first, latest = streaming.trend_windows(_batches([100] * 4))
    assert list(first["batch_id"]) == [1] and list(latest["batch_id"]) == [3]  # never overlapping, batch 0 left out
