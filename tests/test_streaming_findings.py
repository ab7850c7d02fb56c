"""The streaming section's findings on known batch series (no Spark): a query whose batches grew slower is named with
the operator that grew most, a steady one is not; one that processed fewer rows per second than arrived in most of
its latest batches does not keep up; a query of too few batches gets no verdict. The terminal's words on each query."""
import numpy as np
import pandas as pd

from cloudprofiler.analysis import source_rows
from cloudprofiler.analysis.report import streaming, terminal
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


def _source_latency(p99_ms, sources=("delivered", "emitted"), reached=(("Filter", 2),)):
    """source_latency()'s rows per batch for each operator `reached` (name, position), and the lifetime rows
    latency_rows() gives beside them: from emission p99_ms a batch (a list per operator, or one for all), from delivery
    a tenth of it."""
    each = p99_ms if isinstance(p99_ms[0], list) else [p99_ms] * len(reached)
    per_batch = pd.DataFrame([
        {"query_id": "id-1", "run_id": "run-1", "batch_id": b, "source": source, "position": position,
         "operator": operator, "rows": 10, "p50_ns": ms * 5e5 * scale, "p99_ns": ms * 1e6 * scale}
        for source, scale in (("delivered", 0.1), ("emitted", 1.0), ("event_time", 1.0), ("window_end", 2.0))
        if source in sources
        for (operator, position), series in zip(reached, each) for b, ms in enumerate(series)])
    lifetime = per_batch.groupby(["query_id", "run_id", "source", "position", "operator"], as_index=False).agg(
        rows=("rows", "sum"), p50_ns=("p50_ns", "median"), p99_ns=("p99_ns", "max"), max_ns=("p99_ns", "max"),
        batches=("batch_id", "count")).assign(err_max_ns=0.0)
    lifetime.loc[lifetime["source"].isin(["event_time", "window_end"]), "err_max_ns"] = np.nan  # wall clocks
    return per_batch, lifetime


def _found_latency(batches, per_batch, lifetime, trends=None):
    data = ReportData(summary={"span_ns": 60e9})
    data.batches, data.source_latency, data.source_lifetime = batches, per_batch, lifetime
    data.batch_trends = trends if trends is not None else pd.DataFrame()
    return [(f.kind, f.text) for f in streaming.findings(data, Finding)]


def test_records_that_take_longer_from_the_source_are_a_finding_told_from_their_emission():
    p99 = [3_000] + [40] * 10 + [2_100] * 10  # batch 0 left out, as for the batch time
    [(kind, text)] = _found_latency(_batches([100] * 21), *_source_latency(p99))
    assert kind == "streaming_latency"
    assert text == ("The streaming query `q`'s records took longer from the source: their p99 from emission to Filter "
                    "(operator 2 of its plan) grew from 40 ms (batches 1-10) to 2.1 s (batches 11-20), so records wait "
                    "longer for their batch: the query does not keep up with its input's rate.")
    # where the source knows no emission on the operators' clock, from the records' delivery to Spark
    [(_, text)] = _found_latency(_batches([100] * 21), *_source_latency(p99, sources=("delivered",)))
    assert "their p99 from delivery to Spark to Filter" in text and "from 4 ms (batches 1-10) to 210 ms" in text


def test_windowed_results_written_ever_later_after_their_window_are_a_finding_of_their_own():
    """A windowed aggregation's results (from their window's end, twice the records' latency here) grew as the
    records did: a finding for each, the results' in their own words; results that stay steady are none."""
    p99 = [3_000] + [40] * 10 + [2_100] * 10
    found = _found_latency(_batches([100] * 21), *_source_latency(
        [p99, p99], sources=("emitted", "window_end"), reached=(("Filter", 2), ("sink", 0))))
    texts = [text for kind, text in found if kind == "streaming_latency"]
    assert len(texts) == 2 and texts[0].startswith("The streaming query `q`'s records took longer from the source: "
                                                   "their p99 from emission to the sink"), texts
    assert texts[1] == ("The streaming query `q`'s windowed results were written later after their window's end: "
                        "their p99 from the window's end to the sink (its batch's last task's end) grew from 80 ms "
                        "(batches 1-10) to 4.2 s (batches 11-20), so each window's result waits longer: the query "
                        "does not keep up with its input's rate."), texts
    steady = [3_000] + [40] * 20
    assert _found_latency(_batches([100] * 21), *_source_latency(
        [steady, steady], sources=("emitted", "window_end"), reached=(("Filter", 2), ("sink", 0)))) == []


def test_without_an_emission_the_latency_is_told_from_the_event_time_with_no_bound():
    p99 = [3_000] + [40] * 10 + [2_100] * 10
    [(_, text)] = _found_latency(_batches([100] * 21), *_source_latency(p99, sources=("delivered", "event_time")))
    assert "their p99 from event time to Filter (operator 2 of its plan) grew from 40 ms" in text
    # the emission, on a calibrated clock, is preferred where the source knows it
    [(_, text)] = _found_latency(_batches([100] * 21), *_source_latency(
        p99, sources=("delivered", "emitted", "event_time")))
    assert "their p99 from emission to Filter" in text
    _, lifetime = _source_latency(p99, sources=("delivered", "event_time"))
    words = streaming._lifetime_words(source_rows.source_reach(lifetime, "id-1"))
    assert words.startswith(" Its records from event time to Filter (operator 2), 210 sampled in 21 batches: p50 ")
    assert words.endswith(" (the event's clock against the executors' wall clocks: not bounded).")


def test_the_latency_from_the_source_is_told_to_the_sink_where_the_batches_last_tasks_were_timed():
    steady, grew = [40] * 21, [3_000] + [40] * 10 + [2_100] * 10  # the records wait at the sink, not before
    [(_, text)] = _found_latency(_batches([100] * 21), *_source_latency([steady, grew],
                                                                        reached=(("Filter", 2), ("sink", 0))))
    assert ("their p99 from emission to the sink (its batch's last task's end) grew from 40 ms (batches 1-10) to "
            "2.1 s") in text
    assert _found_latency(_batches([100] * 21), *_source_latency([grew, steady],
                                                                 reached=(("Filter", 2), ("sink", 0)))) == []


def test_the_latency_finding_names_the_operator_whose_time_grew_most():
    """The issue's case: the p99 from source to sink grew over the latest batches, and the aggregation is the
    operator whose time per batch grew (the batches' own time steady: no finding of its own)."""
    trends = pd.DataFrame({"query_id": "id-1", "position": [2, 4], "operator": ["Filter", "HashAggregate"],
                           "first_s": [0.010, 0.020], "latest_s": [0.012, 0.090]})
    grew = [3_000] + [40] * 10 + [2_100] * 10
    [(kind, text)] = _found_latency(_batches([100] * 21), *_source_latency(grew, reached=(("sink", 0),)), trends)
    assert kind == "streaming_latency"
    assert text.endswith("the query does not keep up with its input's rate: HashAggregate (operator 4 of its plan) "
                         "grew most, from 20 ms to 90 ms a batch.")


def test_steady_or_barely_longer_latency_from_the_source_is_no_finding():
    for p99 in ([40] * 21, [40] * 11 + [56] * 10, [10] * 11 + [90] * 10):  # steady; 1.4 x; 9 x but 80 ms more
        assert _found_latency(_batches([100] * 21), *_source_latency(p99)) == []


def test_the_terminal_tells_each_query_s_batches_and_its_records_path_from_the_source(capsys):
    """Not only the page: the terminal says per query its batches' time and its records' latency from the source to
    the sink, then to each operator they reach, in the order they pass them."""
    data = ReportData(summary={"span_ns": 60e9})
    data.batches = _batches([100] * 20 + [300])
    # the scan's conversion passes on more records than the filter above it, whose median is less: still first
    data.source_latency, data.source_lifetime = _source_latency(
        [[50] * 21, [10] * 21, [40] * 21], reached=(("ColumnarToRow", 3), ("Filter", 2), ("sink", 0)))
    terminal.print_streaming(data, 200)
    printed = capsys.readouterr().out
    assert " ".join(printed.split()).startswith(
        "Streaming queries - `q` · 21 batches · 2,100 input rows · query id-1. Batch time over the query's life: "
        "median 100 ms, p95 100 ms, max 300 ms. Its records from emission to the sink (its batch's last task's end), "
        "210 sampled in 21 batches: p50 20 ms, p99 40 ms, max 40 ms. from emission to records p50 p99 max"), printed
    lines = printed.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("from emission to")))
    assert [line.split("  ")[0] for line in lines[header + 1:header + 4]] == [
        "ColumnarToRow (operator 3)", "Filter (operator 2)", "the sink (its batch's last task's end)"], printed
    # a query without streaming batches: nothing
    terminal.print_streaming(ReportData(summary={}), 200)
    assert capsys.readouterr().out == ""
