"""The pipeline's figures read right: a hop's percentiles never lie outside its exact min and max, and say how they are
estimated; the latency densities plot shares of each hop's durations that add up to one, each panel's axis on the
hop's own durations. Checked on durations whose true quantiles are known: counted in the hop sketches as the
analysis counts them, and a synthetic application's report (gathered on Spark) against its truth."""
import html
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

import report_sample
from cloudprofiler.analysis import sketch
from cloudprofiler.analysis.hops import HopSketches, _hop_rows
from cloudprofiler.analysis.pipeline import pipeline_rows
from cloudprofiler.analysis.report import render
from cloudprofiler.analysis.report.data import LATENCY_BINS, SKETCH_NOTE, hops_shown
from cloudprofiler.analysis.report.plots import densities
from cloudprofiler.harness.synthetic import SyntheticSpec, TracePoint, make_application
from cloudprofiler.logs import read_log

SVG = "{http://www.w3.org/2000/svg}"
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
BAR_COLOURS = ("#4477aa", "#ee7733")  # the densities' local and remote bars
GAMMA = (1 + sketch.RELATIVE_ACCURACY) / (1 - sketch.RELATIVE_ACCURACY)


def _bucket_edges(value: float) -> tuple[float, float]:
    """The lower and upper edge of the sketch bucket that counts `value` (bucket k: (MIN gamma^(k-2), MIN
    gamma^(k-1)])."""
    k = int(sketch.keys(np.array([value]))[0])
    return sketch.MIN_NS * GAMMA ** (k - 2), sketch.MIN_NS * GAMMA ** (k - 1)


def _hops(durations: dict, remote: "dict | None" = None) -> HopSketches:
    """The sketches of hops a -> b -> c ... given each hop's durations (ns), as the analysis's partitions count
    them; `remote` marks, per hop, which durations cross hosts. Every duration exact (bound 0)."""
    rows = []
    for hop, values in durations.items():
        values = np.asarray(values, dtype=float)
        crossing = np.asarray((remote or {}).get(hop, np.zeros(len(values), bool)))
        rows += _hop_rows(hop, values, np.zeros(len(values)), np.zeros(len(values), bool), crossing)
    channels = [chr(ord("a") + i) for i in range(sum(hop >= 0 for hop in durations) + 1)]
    return HopSketches(channels, pd.DataFrame(rows))


def _report_data(hops: HopSketches):
    """The hand-made sample's application with this pipeline in place of its own (as `gather` fills it)."""
    data = report_sample.sample()
    data.pipeline = pd.DataFrame(pipeline_rows(hops)).assign(pipeline=0)
    shown = hops_shown(data.pipeline)
    data.hop_bounds = pd.concat([hops.bounds(h).assign(pipeline=0, hop=h) for h in shown["hop"]], ignore_index=True)
    data.hop_errors = pd.concat([hops.errors(h, 8).assign(pipeline=0, hop=h) for h in shown["hop"]],
                                ignore_index=True)
    data.latency_histograms = pd.concat([hops.histogram(h, LATENCY_BINS).assign(pipeline=0, hop=h)
                                         for h in shown["hop"]], ignore_index=True)
    return data


def _pipeline_table(page: str) -> list[dict]:
    """The page's pipeline table: a dict per row, column title -> the cell's data-value."""
    table = page.split('<table class="pipeline">')[1].split("</table>")[0]
    columns = re.findall(r"<th>([^<]*)</th>", table)
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1]):
        values = [float(v) if v else None for v in re.findall(r'<td(?: data-value="([^"]*)")?[^>]*>', row)]
        rows.append(dict(zip(columns, values)))
    return rows


def _duration(label: str) -> float:
    number, unit = label.split()
    return float(number) * UNITS[unit]


def _panels(svg: str) -> list[dict]:
    """Each drawn panel of a figure, from its SVG (text kept as text): its x and y tick labels with their positions
    and its bars (local and remote) as (left, right, bottom, top) in SVG units, y growing downwards."""
    root = ET.fromstring(svg)
    panels = []
    for axes in root.iter(f"{SVG}g"):
        if not re.fullmatch(r"axes_\d+", axes.get("id", "")):
            continue
        panel = {"x": [], "y": [], "bars": []}
        for tick in axes.iter(f"{SVG}g"):
            kind = re.fullmatch(r"([xy])tick_\d+", tick.get("id", ""))
            label = next(tick.iter(f"{SVG}text"), None)  # minor ticks have none
            if kind and label is not None:
                mark = next(tick.iter(f"{SVG}use"))
                panel[kind[1]].append(("".join(label.itertext()), float(mark.get(kind[1]))))
        for patch in axes.findall(f"{SVG}g"):  # the bars; the legend's swatches are deeper
            path = patch.find(f"{SVG}path")
            if re.fullmatch(r"patch_\d+", patch.get("id", "")) and path is not None and any(
                    f"fill: {c}" in path.get("style", "") for c in BAR_COLOURS):
                points = np.array(re.findall(r"[ML] ([-\d.]+) ([-\d.]+)", path.get("d")), dtype=float)
                panel["bars"].append((points[:, 0].min(), points[:, 0].max(), points[:, 1].max(), points[:, 1].min()))
        panels.append(panel)
    return panels


def _shares(panel: dict) -> np.ndarray:
    """The bars' heights in the units of the panel's y axis, read from its ticks (labels 'N%')."""
    assert panel["y"] and all(label.endswith("%") for label, _ in panel["y"]), panel["y"]
    values = np.array([float(label.rstrip("%")) / 100 for label, _ in panel["y"]])
    positions = np.array([position for _, position in panel["y"]])
    scale, zero = np.polyfit(values, positions, 1)  # position = zero + scale * value
    return np.array([(top - bottom) / scale for _, _, bottom, top in panel["bars"]])


def _check_densities(svg: str, ranges: list[tuple[float, float]]) -> None:
    """Each panel: bars whose shares add up to one on a y axis of shares; x ticks inside [low, high] of its hop,
    widened by its first and last bin (a bin is a run of whole buckets, sketch.bucket_bins: the one that holds the
    max may end up to a bin's width above it), bars spanning most of the panel's width."""
    panels = _panels(svg)
    assert len(panels) == len(ranges)
    for panel, (low, high) in zip(panels, ranges):
        shares = _shares(panel)
        assert shares.sum() == pytest.approx(1.0, abs=0.01) and shares.max() <= 1.0
        assert panel["x"], "no x tick"
        first, last = sketch.keys(np.array([low, high]))
        widest = GAMMA ** (-(-(last - first + 1) // LATENCY_BINS) + 1)  # a bin, and a bucket for where values fall
        for label, _ in panel["x"]:
            assert low / widest <= _duration(label) <= high * widest, (label, low, high, widest)
        left, right = min(b[0] for b in panel["bars"]), max(b[1] for b in panel["bars"])
        ticks = sorted(p for _, p in panel["x"])
        assert ticks[0] >= left - 1 and ticks[-1] <= right + 1  # the axis ends where the bars end


def test_a_hops_percentiles_never_pass_its_exact_min_and_max_and_say_how_they_are_estimated(tmp_path, capsys):
    # 5% of the durations at a max just above its bucket's lower edge (the bucket's value lies above it) and 5% at a
    # min just under its bucket's upper edge (the bucket's value lies under it): p99 and p1 fall in those buckets
    lowest = _bucket_edges(1e6)[1] * (1 - 1e-7)
    highest = _bucket_edges(3e6)[0] * (1 + 1e-7)
    values = np.concatenate([np.full(50, lowest), np.linspace(1.2e6, 2.5e6, 900), np.full(50, highest)])
    assert sketch.values(sketch.keys(np.array([lowest, highest]))).tolist() != [lowest, highest]
    [row] = pipeline_rows(_hops({0: values}))[:1]
    assert (row["min_ns"], row["max_ns"]) == (lowest, highest)
    assert row["p1_ns"] == lowest and row["p99_ns"] == highest  # the values at their ranks
    for name in ("p5_ns", "p25_ns", "p50_ns", "p75_ns", "p95_ns"):
        exact = np.quantile(values, float(name[1:-3]) / 100, method="inverted_cdf")
        assert abs(row[name] - exact) <= sketch.RELATIVE_ACCURACY * exact

    page = render(_report_data(_hops({0: values})), tmp_path / "r.html").read_text()
    [shown] = _pipeline_table(page)
    assert shown["p50"] <= shown["p99"] <= shown["max"] == highest
    caption = page.split('<section id="pipeline">')[1].split("</section>")[0]
    assert html.escape(SKETCH_NOTE) in caption and "within 0.5% of the true value" in SKETCH_NOTE
    assert SKETCH_NOTE.split(":")[0] in capsys.readouterr().out  # and beside the terminal's pipeline table


def test_the_bounds_percentiles_never_pass_the_largest_bound():
    bound = _bucket_edges(13e3)[0] * (1 + 1e-7)  # every cross-host bound the same, just above its bucket's edge
    rows = _hop_rows(0, np.full(100, 5e5), np.full(100, bound), np.zeros(100, bool), np.ones(100, bool))
    hops = HopSketches(["a", "b"], pd.DataFrame(rows))
    [row] = pipeline_rows(hops)[:1]
    assert row["err_p50_ns"] == row["err_p99_ns"] == row["err_max_ns"] == bound
    assert hops.bounds(0)["err_p50_ns"].tolist() == [bound]


def test_densities_are_shares_of_one_on_each_hops_own_axis():
    rng = np.random.default_rng(4)
    narrow = rng.normal(3.1e9, 0.02e9, 20_000)  # seconds-long durations in one narrow band
    wide = rng.lognormal(np.log(2e5), 1.2, 20_000)  # 200 us, spread over decades, half of them cross-host
    durations = {0: narrow, 1: wide, -1: narrow + wide}  # end to end: the same tuples through both hops
    hops = _hops(durations, remote={1: np.arange(20_000) % 2 == 0, -1: np.arange(20_000) % 2 == 0})
    data = _report_data(hops)
    plot = densities(data)
    assert "share of its durations in each bin" in plot.caption
    shown = hops_shown(data.pipeline)
    _check_densities(plot.svg, [(durations[h].min(), durations[h].max()) for h in shown["hop"]])
    narrow_panel = _panels(plot.svg)[list(shown["hop"]).index(0)]
    first, last = sketch.keys(np.array([narrow.min(), narrow.max()]))
    assert len(narrow_panel["bars"]) == last - first + 1  # a band narrower than 60 buckets: a bar per bucket
    assert "share of durations" in plot.svg and "per decade" not in plot.svg


# A synthetic application whose true times are known: source -> parse waits 3 ms +- 1% (one narrow band, seconds
# apart from nothing else), parse -> join crosses the shuffle (and hosts), join -> sink waits 50 us spread widely
SYNTHETIC = SyntheticSpec(records=40_000, hosts=2, executors_per_host=1, jobs=2, partitions=4, chunk=256,
                          pipeline=(TracePoint("source"), TracePoint("parse", 3000.0, 0.01),
                                    TracePoint("join", after_shuffle=True), TracePoint("sink", 50.0, 1.0)),
                          straggler=None)


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory):
    from cloudprofiler.analysis import open_application
    from cloudprofiler.analysis.report.data import gather

    made = make_application(tmp_path_factory.mktemp("synthetic"), SYNTHETIC)
    app = open_application(str(made.path))
    data = gather(app)
    page = render(data, tmp_path_factory.mktemp("page") / "report.html", quiet=True).read_text()
    truth = read_log(made.truth_path).to_pandas()
    hz = data.summary["tsc_hz"]
    at = {channel: rows.set_index("tuple_id")["ref_tsc"] for channel, rows in truth.groupby("channel")}
    true = {}  # (from, to) -> every true latency of the hop, ns
    for r in data.pipeline.itertuples():
        start, end = at[r.from_channel], at[r.to_channel]
        true[(r.from_channel, r.to_channel)] = ((end - start.reindex(end.index)).dropna().to_numpy(np.float64)
                                                * 1e9 / hz)
    return {"data": data, "page": page, "true": true}


def test_a_synthetic_applications_hops_show_their_true_percentiles_within_the_max(synthetic_report):
    data, page, true = synthetic_report["data"], synthetic_report["page"], synthetic_report["true"]
    shown = hops_shown(data.pipeline)
    assert len(shown) == 4  # end to end and three hops
    for hop, row in zip(shown.itertuples(), _pipeline_table(page)):
        latencies = true[(hop.from_channel, hop.to_channel)]
        bound = hop.err_max_ns  # cross-host durations are off the truth by their bound at most
        assert row["p50"] <= row["p99"] <= row["max"] and hop.min_ns <= hop.p1_ns
        assert abs(row["max"] - latencies.max()) <= bound + 1e-6 * latencies.max()
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            exact = np.quantile(latencies, q, method="inverted_cdf")
            assert abs(row[name] - exact) <= sketch.RELATIVE_ACCURACY * exact + bound, (hop, name, row, exact)


def test_a_synthetic_applications_densities_are_shares_on_each_hops_durations(synthetic_report):
    data, page = synthetic_report["data"], synthetic_report["page"]
    svg = page.split('data-plot="densities">')[1].split("</figure>")[0]
    shown = hops_shown(data.pipeline)
    _check_densities(svg, list(zip(shown["min_ns"], shown["max_ns"])))  # each hop's panel on its own durations
    assert shown["min_ns"].max() > 10 * shown["min_ns"].min()  # hops far apart: one shared axis would not do


def test_the_timeline_draws_attempts_that_the_task_table_does_not_list_yet(tmp_path):
    """A report of a running application (`cps.report(spark)` in a notebook) can meet attempts whose records came
    before the driver's task table listed them: they have no stage. The timeline draws them in grey, named in its
    legend, and the stage figures leave them out; the page is written."""
    from cloudprofiler.analysis.report.plots import stage_durations, timeline

    data = report_sample.sample()
    unlisted = data.tasks.iloc[:2].assign(stage_id=np.nan, task_attempt_id=[10_001, 10_002])
    data.tasks = pd.concat([data.tasks, unlisted], ignore_index=True)
    data.stage_durations = pd.concat([data.stage_durations, data.stage_durations.iloc[:1].assign(stage_id=np.nan)],
                                     ignore_index=True)
    drawn = timeline(data)
    assert "not in the task table yet" in drawn.svg and "#bbbbbb" in drawn.svg
    assert stage_durations(data).svg
    page = render(data, tmp_path / "report.html", quiet=True)
    assert "not in the task table yet" in page.read_text()
