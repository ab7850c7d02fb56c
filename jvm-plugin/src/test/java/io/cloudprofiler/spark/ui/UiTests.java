package io.cloudprofiler.spark.ui;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.cloudprofiler.spark.Messages;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;

/** Tests of the Cloudprofiler tab's figures on known answers. */
public final class UiTests {
  private UiTests() {}

  private static LiveStages.Task task(
      long id, long durationMs, long gcMs, long fetchMs, long delayMs) {
    return new LiveStages.Task(id, (int) id, "1", "host", durationMs, gcMs, fetchMs, delayMs);
  }

  /**
   * A stage of 10,000 tasks of 1..10,000 ms: a sample of 4,096 of them, whose median lies near the
   * true 5,000 ms and whose stragglers (over 1.5 x the median), scaled to the stage, near the true
   * count; the slowest tasks kept exactly.
   */
  public static void testALargeStageIsSampledUniformlyAndItsStragglersEstimated() {
    LiveStages.Stage stage = new LiveStages.Stage(3, 0, "a stage", 0);
    for (long d = 1; d <= 10_000; d++) stage.add(task(d, d, 0, 0, 0));
    check(!stage.exact(), () -> "10,000 tasks: sampled");
    long[] sorted = stage.sorted();
    equal(LiveStages.SAMPLE, sorted.length);
    long median = LiveFigures.quantile(sorted, 0.5);
    check(Math.abs(median - 5_000) < 250, () -> "median " + median);
    long stragglers = LiveFigures.stragglers(stage, sorted, median);
    long truth = 10_000 - (long) Math.floor(1.5 * median);
    check(Math.abs(stragglers - truth) < 250, () -> stragglers + " stragglers, truly " + truth);
    equal(10_000L, stage.slowest.get(0).durationMs());
    equal(9_998L, stage.slowest.get(2).durationMs());
  }

  /** A small stage: every duration, its median at its rank, its stragglers counted exactly. */
  public static void testASmallStageIsExact() {
    LiveStages.Stage stage = new LiveStages.Stage(1, 0, "a stage", 0);
    for (long d : new long[] {100, 100, 110, 120, 400}) stage.add(task(d, d, 0, 0, 0));
    long[] sorted = stage.sorted();
    check(stage.exact(), () -> "5 tasks: exact");
    equal(110L, LiveFigures.quantile(sorted, 0.5));
    equal(400L, LiveFigures.quantile(sorted, 0.9));
    equal(1L, LiveFigures.stragglers(stage, sorted, 110));
  }

  /**
   * The part of a task's time named: the largest of GC, fetch wait and scheduler delay, from 10%.
   */
  public static void testTheCauseIsTheLargestPartFromTenPercent() {
    equal("GC 40%", LiveFigures.cause(task(1, 1000, 400, 100, 0)));
    equal("waiting for shuffle blocks 25%", LiveFigures.cause(task(1, 1000, 50, 250, 100)));
    equal("", LiveFigures.cause(task(1, 1000, 90, 50, 20)));
  }

  /**
   * The metrics text of known figures: a stage's quantiles, count and max in seconds, a stage with
   * no task ended only its stragglers, an executor's counters under its id escaped as the format
   * asks, a streaming query's latest batch (a value it lacks left out).
   */
  public static void testTheMetricsTextHoldsEachStageExecutorAndQueryUnderEscapedLabels()
      throws Exception {
    String text =
        PrometheusText.of(
            new ObjectMapper()
                .readTree(
                    """
                    {"stages": [
                      {"stage_id": 3, "stage_attempt": 0, "tasks": 5, "failed": 1,
                       "median_ms": 110, "p90_ms": 400, "p99_ms": 400, "max_ms": 400,
                       "stragglers": 1},
                      {"stage_id": 4, "stage_attempt": 1, "tasks": 0, "failed": 0,
                       "median_ms": null, "p90_ms": null, "p99_ms": null, "max_ms": null,
                       "stragglers": 0}],
                     "executors": [{"executor_id": "a\\"b\\nc", "records_logged": 10,
                                    "records_dropped": 2, "bytes_written": 300}],
                     "executors_left_out": 0,
                     "streaming": [{"query_id": "q", "query_name": null, "batches": [
                       {"batch_id": 0, "trigger_execution_ms": 10},
                       {"batch_id": 1, "trigger_execution_ms": 2500, "num_input_rows": 7,
                        "input_rows_per_second": 1.5, "processed_rows_per_second": null}]}]}
                    """));
    String stage = "{stage_id=\"3\",stage_attempt=\"0\"";
    for (String line :
        new String[] {
          "cloudprofiler_stage_task_duration_seconds" + stage + ",quantile=\"0.5\"} 0.11",
          "cloudprofiler_stage_task_duration_seconds" + stage + ",quantile=\"0.99\"} 0.4",
          "cloudprofiler_stage_task_duration_seconds_count" + stage + "} 4",
          "cloudprofiler_stage_task_duration_max_seconds" + stage + "} 0.4",
          "cloudprofiler_stage_stragglers" + stage + "} 1",
          "cloudprofiler_stage_stragglers{stage_id=\"4\",stage_attempt=\"1\"} 0",
          "# TYPE cloudprofiler_executor_records_logged_total counter",
          "cloudprofiler_executor_records_logged_total{executor_id=\"a\\\"b\\nc\"} 10",
          "cloudprofiler_executor_records_dropped_total{executor_id=\"a\\\"b\\nc\"} 2",
          "cloudprofiler_streaming_batch_duration_seconds{query_id=\"q\",query_name=\"\"} 2.5",
          "cloudprofiler_streaming_batch_id{query_id=\"q\",query_name=\"\"} 1",
          "cloudprofiler_streaming_input_rows_per_second{query_id=\"q\",query_name=\"\"} 1.5"
        }) check(text.contains(line + "\n"), () -> "no line " + line + " in\n" + text);
    check(!text.contains("stage_id=\"4\",stage_attempt=\"1\",quantile"), () -> text);
    check(!text.contains("cloudprofiler_streaming_processed_rows_per_second{"), () -> text);
  }

  /**
   * Executors' counters: a message with negative counters is ignored; past KEPT executors the one
   * heard from longest ago is left out, and counted.
   */
  public static void testExecutorsAreKeptBoundedAndBadCountersIgnored() {
    LiveExecutors executors = new LiveExecutors();
    executors.update(new Messages.Counters("1", -1, 0, 0, 1, 1, List.of(), 0, 0, 0, 0));
    executors.update(new Messages.Counters("1", 1, 0, 0, 1, 1, List.of(), 0, -1, 0, 0));
    equal(0, executors.all().size());
    for (int i = 0; i <= LiveExecutors.KEPT; i++)
      executors.update(
          new Messages.Counters(Integer.toString(i), i, 0, 1, 1, 1, List.of(), 0, 0, 0, 0));
    equal(LiveExecutors.KEPT, executors.all().size());
    equal(1L, executors.leftOut());
    check(executors.all().stream().noneMatch(c -> c.executorId().equals("0")), () -> "0 kept");
    equal((long) LiveExecutors.KEPT, executors.totals()[2]);
  }

  /**
   * An executor's channels: at most CHANNELS_PER_EXECUTOR kept, names cut to NAME_CHARS; those
   * beyond, with negative or infinite counts or of another type, and those the executor itself left
   * out are counted; the figures list the busiest first, and so does the metrics text.
   */
  public static void testChannelsAreBoundedCheckedAndListedBusiestFirst() {
    List<Object> channels = new ArrayList<>();
    channels.add("not a channel");
    channels.add(new Messages.ChannelCount("negative", -1, 0, 0, 0));
    channels.add(new Messages.ChannelCount("infinite", 1, 0, Double.POSITIVE_INFINITY, 0));
    channels.add(new Messages.ChannelCount("x".repeat(300), 7, 1, 100, 0.5));
    for (int i = 0; i < LiveExecutors.CHANNELS_PER_EXECUTOR; i++)
      channels.add(new Messages.ChannelCount("c" + i, i, 0, i, 0));
    @SuppressWarnings("unchecked") // as an untrusted message may carry
    List<Messages.ChannelCount> untrusted = (List<Messages.ChannelCount>) (List<?>) channels;
    LiveExecutors executors = new LiveExecutors();
    executors.update(new Messages.Counters("e", 10, 1, 100, 7, 2, untrusted, 5, 0, 0, 0));
    JsonNode figures = figuresOf(executors, new LiveHops((d, t) -> null, 1, System::nanoTime));
    JsonNode rows = figures.path("channels");
    equal(LiveExecutors.CHANNELS_PER_EXECUTOR, rows.size());
    equal(5L + 3 + 1, figures.path("channels_left_out").asLong()); // its own, 3 bad, c49 past 50
    equal("x".repeat(LiveExecutors.NAME_CHARS), rows.get(0).path("channel").asText());
    equal(0.5, rows.get(0).path("drops_per_second").asDouble());
    equal(2.0, rows.get(0).path("interval_s").asDouble());
    equal("c48", rows.get(1).path("channel").asText());
    equal(48.0, rows.get(1).path("records_per_second").asDouble());
    String text = PrometheusText.of(figures);
    for (String line :
        new String[] {
          "cloudprofiler_channel_records_per_second{executor_id=\"e\",channel=\"c48\"} 48",
          "cloudprofiler_channel_records_logged_total{executor_id=\"e\",channel=\"c48\"} 48",
          "cloudprofiler_channel_drops_per_second{executor_id=\"e\",channel=\"c1\"} 0",
          "cloudprofiler_channels_left_out 9"
        }) check(text.contains(line + "\n"), () -> "no line " + line + " in\n" + text);
  }

  /**
   * Figures from an event log that lack fields or hold others' types (an older or damaged summary)
   * still render, their gaps as "-", and so does their metrics text.
   */
  /** Ids first..first+n-1 of level >= level, at ticks {@code at(id)}. */
  private static long[][] sampled(
      long first, int n, int level, java.util.function.LongUnaryOperator at) {
    long[] ids =
        java.util.stream.LongStream.range(first, first + n)
            .filter(i -> LiveHops.level(i) >= level)
            .toArray();
    return new long[][] {ids, java.util.Arrays.stream(ids).map(at).toArray()};
  }

  /**
   * Executors Spark removed are listed with its reason (cut to REASON_CHARS), the KEPT removed
   * last, all of them counted; the tab and the metrics show them.
   */
  public static void testRemovedExecutorsAreListedWithTheirReasonAndCounted() {
    LiveExecutors executors = new LiveExecutors();
    executors.removed("7", 1_700_000_000_000L, "Command exited with code 137");
    executors.removed("8", 1_700_000_000_001L, "x".repeat(LiveExecutors.REASON_CHARS + 10));
    for (int i = 0; i < LiveExecutors.KEPT; i++) executors.removed("e" + i, i, null);
    JsonNode figures = figuresOf(executors, new LiveHops((d, t) -> null, 1, System::nanoTime));
    JsonNode removed = figures.path("executors_removed");
    equal(LiveExecutors.KEPT, removed.size());
    equal("e0", removed.get(0).path("executor_id").asText());
    equal(LiveExecutors.KEPT + 2L, figures.path("executors_removed_count").asLong());
    check(
        PrometheusText.of(figures)
            .contains("cloudprofiler_executors_removed_total " + (LiveExecutors.KEPT + 2)),
        () -> "the count on the metrics page");
    LiveExecutors two = new LiveExecutors();
    two.lostCollected("2", 24598, "vm-0", 5, 2);
    two.lostCollected("2", 1, "bad", 1, 3); // more cut than collected: not of ours, ignored
    two.removed("7", 1_700_000_000_000L, "Command exited with code 137");
    two.removed("8", 0, "x".repeat(LiveExecutors.REASON_CHARS + 10));
    List<LiveExecutors.Removed> kept = two.removed();
    equal(LiveExecutors.REASON_CHARS, kept.get(1).reason().length());
    String html =
        new TabContent(
                () -> figuresOf(two, new LiveHops((d, t) -> null, 1, System::nanoTime)), true)
            .html(null);
    check(
        html.contains(
            "<td>7</td><td>2023-11-14T22:13:20Z</td><td>Command exited with code 137</td>"),
        () -> html);
    check(html.contains("<td>24598</td><td>vm-0</td><td>2</td><td>5</td><td>2</td>"), () -> html);
    check(!html.contains("<td>bad</td>"), () -> html);
    check(
        html.contains(
            "The files of lost process 24598 (vm-0) were collected by executor 2: 2 of 5 cut where"
                + " it died, read up to their last complete batch."),
        () -> html);
  }

  /**
   * The findings from the figures, most important first: drops, a removed executor, the worst
   * straggler of each stage (the stage whose slowest task took most over its median first), the
   * operator that dominates the latest SQL execution, the slowest hop and unbounded pairs, the
   * calibration's bound; an application with none of the first kinds is told nothing stands out.
   */
  public static void testTheFindingsSayWhatStandsOutMostImportantFirst() throws Exception {
    String json =
        "{\"executors\": [{\"executor_id\": \"1\", \"records_dropped\": 5}, {\"executor_id\":"
            + " \"2\", \"records_dropped\": 7}], \"executors_removed\": [{\"executor_id\": \"3\","
            + " \"reason\": \"Command exited with code 137\"}], \"executors_removed_count\": 1,"
            + " \"stages\": [{\"stage_id\": 4, \"name\": \"count\", \"median_ms\": 100,"
            + " \"stragglers\": 2, \"slowest\": [{\"task_id\": 9, \"partition\": 7,"
            + " \"executor_id\": \"1\", \"host\": \"h\", \"duration_ms\": 420, \"cause\": \"GC"
            + " 40%\"}]}, {\"stage_id\": 5, \"name\": \"sum\", \"median_ms\": 1000, \"stragglers\":"
            + " 1, \"slowest\": [{\"task_id\": 11, \"partition\": 0, \"executor_id\": \"2\","
            + " \"host\": \"g\", \"duration_ms\": 2000, \"cause\": \"\"}]}], \"operators\":"
            + " [{\"sql_execution_id\": 12, \"probe_id\": 7, \"operator\": \"SortMergeJoin\","
            + " \"exclusive_s\": 6.2}, {\"sql_execution_id\": 12, \"probe_id\": 3, \"operator\":"
            + " \"Filter\", \"exclusive_s\": 3.8}, {\"sql_execution_id\": 11, \"probe_id\": 1,"
            + " \"operator\": \"Scan\", \"exclusive_s\": 100}], \"hops\": [{\"from_channel\":"
            + " \"a\", \"to_channel\": \"b\", \"count\": 10, \"sampled_one_in\": 1, \"p99_s\":"
            + " 0.002, \"unbounded_count\": 0}, {\"from_channel\": \"b\", \"to_channel\": \"c\","
            + " \"count\": 10, \"sampled_one_in\": 4, \"p99_s\": 0.0012, \"unbounded_count\": 3}],"
            + " \"calibration\": [{\"host_a\": \"h\", \"host_b\": \"g\", \"bound_s\": 5e-6}]}";
    JsonNode figures = new TabContent(() -> parse(json), true).json();
    List<String> texts = new ArrayList<>();
    figures
        .path("findings")
        .forEach(f -> texts.add(f.path("level").asText() + ": " + f.path("text").asText()));
    equal(
        List.of(
            "warning: 12 records were dropped by the profiler (executor 2 the most: 7): the figures"
                + " drawn from the logs miss them.",
            "warning: Executor 3 was removed (Command exited with code 137): its records since its"
                + " last collection reach the log folder when the next executor on its host"
                + " collects them.",
            "warning: Stage 5 (sum): task 11 (partition 0, executor 2 on g) took 2.00 s, 2.0x the"
                + " stage's median 1.00 s.",
            "warning: Stage 4 (count): task 9 (partition 7, executor 1 on h) took 420 ms, 4.2x the"
                + " stage's median 100 ms; GC 40%; 1 more stragglers in this stage.",
            "info: SQL execution 12: SortMergeJoin (probe 7) takes 62% of its timed operators' own"
                + " time.",
            "info: Between trace points, a -> b is the slowest hop: p99 2.0 ms over 10 sampled"
                + " records (1 in 1).",
            "info: 3 sampled pairs of records cross machines that no calibration round relates"
                + " yet: counted, not measured.",
            "info: Cross-machine durations are known within about 10.0 us (twice the widest anchor"
                + " bound of the latest calibration round, h / g)."),
        texts);
    String html = new TabContent(() -> parse(json), true).html(null);
    check(html.contains("<li class=\"warning\"><strong>warning</strong>: 12 records"), () -> html);
    JsonNode quiet = new TabContent(() -> parse("{\"stages\": []}"), false).json();
    equal("Nothing stands out so far.", quiet.path("findings").get(0).path("text").asText());
  }

  private static JsonNode parse(String json) {
    try {
      return new ObjectMapper().readTree(json);
    } catch (Exception e) {
      throw new IllegalArgumentException(json, e);
    }
  }

  /** The figures of an application with these hops and nothing else. */
  private static JsonNode figuresOf(LiveHops hops) {
    return figuresOf(new LiveExecutors(), hops);
  }

  /** The figures of an application with these executors and hops and nothing else. */
  private static JsonNode figuresOf(LiveExecutors executors, LiveHops hops) {
    return liveFigures(executors, hops, new TabWork()).get();
  }

  /** An application's live figures with these executors and hops and nothing else. */
  private static LiveFigures liveFigures(LiveExecutors executors, LiveHops hops, TabWork work) {
    return new LiveFigures(
        new LiveStages(work),
        executors,
        List::of,
        List.of(),
        List::of,
        List::of,
        hops,
        work,
        () -> "folder");
  }

  /**
   * The tab's own work: the executors' as their latest messages said, summed; the driver's figures
   * counted from the second on (the first counts as it ends); both in the metrics text.
   */
  public static void testTheTabsOwnWorkIsSummedAndExported() {
    LiveExecutors executors = new LiveExecutors();
    executors.update(new Messages.Counters("a", 1, 0, 1, 1, 1, List.of(), 0, 1, 1, 1));
    for (String e : new String[] {"a", "b"}) // a's newer message replaces its first
    executors.update(
          new Messages.Counters(e, 1, 0, 1, 1, 1, List.of(), 0, 1_000_000_000, 250_000_000, 1000));
    LiveHops hops = new LiveHops((d, t) -> null, 1, System::nanoTime);
    LiveFigures live = liveFigures(executors, hops, new TabWork());
    equal(0.0, live.get().path("tab_work").path("driver_s").path("figures").asDouble());
    JsonNode figures = live.get();
    JsonNode tab = figures.path("tab_work");
    check(tab.path("driver_s").path("figures").asDouble() > 0, tab::toString);
    equal(2.0, tab.path("executors_s").path("messages").asDouble());
    equal(0.5, tab.path("executors_s").path("scan").asDouble());
    equal(2000L, tab.path("executors_scanned_records").asLong());
    String text = PrometheusText.of(figures);
    for (String line :
        new String[] {
          "cloudprofiler_tab_work_seconds_total{process=\"executors\",part=\"messages\"} 2",
          "cloudprofiler_tab_work_seconds_total{process=\"executors\",part=\"scan\"} 0.5",
          "cloudprofiler_tab_work_seconds_total{process=\"driver\",part=\"listeners\"} 0"
        }) check(text.contains(line + "\n"), () -> "no line " + line + " in\n" + text);
  }

  /**
   * Three trace points added out of order (c first) chain as their tuples pass them: a -> b within
   * one TSC domain (100 or 101 ns at 1 GHz, exact), b -> c across domains (c's domain 1,000 ticks
   * ahead, translated within 50 ns: 199 or 200 ns, bound 50 ns); a channel kept at level 3 pairs
   * only ids of level 3 or more; pairs that no calibration relates are counted as unbounded.
   */
  public static void testHopsChainTheTracePointsAndMeasureWithinOneDomainAndAcross() {
    LiveHops.Translation translation =
        (domain, tick) ->
            domain.equals("ref")
                ? new double[] {tick, 0}
                : domain.equals("x") ? new double[] {tick - 1000, 50} : null;
    long[] now = {0};
    LiveHops hops = new LiveHops(translation, 1000, () -> now[0]);
    long[][] c = sampled(0, 1000, 0, i -> 10_000 * i + 300 + 1000);
    long[][] a = sampled(0, 1000, 0, i -> 10_000 * i);
    long[][] b = sampled(0, 1000, 3, i -> 10_000 * i + 100 + (i % 2)); // 100 or 101 ns
    hops.add("x", 1e9, "c", 0, c[0], c[1]);
    hops.add("ref", 1e9, "a", 0, a[0], a[1]);
    hops.add("ref", 1e9, "b", 3, b[0], b[1]);
    long[][] p = sampled(1 << 20, 100, 0, i -> i), q = sampled(1 << 20, 100, 0, i -> i);
    hops.add("ref", 1e9, "p", 0, p[0], p[1]);
    hops.add("nowhere", 1e9, "q", 0, q[0], q[1]);
    List<java.util.Map<String, Object>> rows = hops.rows();
    equal(3, rows.size());
    java.util.Map<String, Object> ab = rows.get(0), bc = rows.get(1), pq = rows.get(2);
    equal(
        List.of("a", "b", "c"),
        List.of(ab.get("from_channel"), bc.get("from_channel"), bc.get("to_channel")));
    long level3 = b[0].length;
    check(level3 > 80 && level3 < 170, () -> "ids of level 3 in 1,000: " + level3);
    equal(level3, ab.get("count"));
    equal(8.0, ab.get("sampled_one_in"));
    equal(0L, ab.get("remote_count"));
    // within the sketch's 0.5% of 100 or 101
    check(Math.abs((Double) ab.get("p50_s") * 1e9 - 100.5) <= 1.1, () -> "a -> b: " + ab);
    equal(1e-7, ab.get("min_s"));
    equal(101e-9, ab.get("max_s"));
    equal(0.0, ab.get("bound_max_s"));
    equal(level3, bc.get("count"));
    equal(level3, bc.get("remote_count"));
    check(Math.abs((Double) bc.get("p50_s") * 1e9 - 199.5) <= 1.6, () -> "b -> c: " + bc);
    equal(50e-9, bc.get("bound_max_s"));
    equal(
        List.of("p", "q", 0L, 100L),
        List.of(
            pq.get("from_channel"),
            pq.get("to_channel"),
            pq.get("count"),
            pq.get("unbounded_count")));
    check(pq.get("p50_s") == null, () -> "p -> q: " + pq);
    // over the window of all these (the next one begun), as since the start; the one after: none
    now[0] = 1500;
    java.util.Map<String, Object> windowed = hops.rows().get(0);
    equal(
        List.of(level3, ab.get("p50_s"), 101e-9),
        List.of(
            windowed.get("last_count"), windowed.get("last_p50_s"), windowed.get("last_max_s")));
    JsonNode figures = figuresOf(hops);
    String text = PrometheusText.of(figures);
    check(
        text.contains(
            "cloudprofiler_hop_latency_seconds{from_channel=\"a\",to_channel=\"b\",quantile=\"0.5\"}"
                + " "
                + windowed.get("last_p50_s")),
        () -> text);
    now[0] = 2600;
    java.util.Map<String, Object> later = hops.rows().get(0);
    equal(List.of(0L, level3), List.of(later.get("last_count"), later.get("count")));
    check(later.get("last_p50_s") == null, () -> "an empty window: " + later);
    check(
        PrometheusText.of(figuresOf(hops))
            .contains(
                "cloudprofiler_hop_latency_seconds{from_channel=\"a\",to_channel=\"b\",quantile=\"0.99\"}"
                    + " NaN"),
        () -> "NaN quantiles over an empty window");
    check(
        text.contains(
            "cloudprofiler_hop_latency_seconds_count{from_channel=\"b\",to_channel=\"c\"} "
                + level3),
        () -> text);
    check(
        text.contains(
            "cloudprofiler_hop_bound_max_seconds{from_channel=\"b\",to_channel=\"c\"} 5.0E-8"),
        () -> text);
    String html = new TabContent(() -> figures, true).html(null);
    check(html.contains("cloudprofiler-hops") && html.contains("<td>a</td><td>b</td>"), () -> html);
  }

  /** An id's level is the library's cp_sample_level (the native test's known ids). */
  public static void testAnIdsLevelIsTheLibrarys() {
    long[][] known = {
      {0, 0},
      {1, 0},
      {42, 0},
      {-1, 5},
      {Long.MIN_VALUE, 0},
      {6, 13},
      {59587, 16},
      {-0x9e3779b97f4a7c15L, 64}
    };
    for (long[] k : known) equal((int) k[1], LiveHops.level(k[0]));
  }

  /**
   * A chain of 20 trace points (190 pairs of channels sharing ids, more than the PAIRS sketches)
   * shows its 19 hops whole: sketches are kept for the consecutive pairs only.
   */
  public static void testALongChainShowsEveryHop() {
    LiveHops hops = new LiveHops((d, t) -> null, 1_000_000_000L, () -> 0);
    long[] ids = java.util.stream.LongStream.range(0, 256).toArray();
    for (int c = 19; c >= 0; c--) { // the last point first: the order comes from the durations
      final int point = c;
      hops.add(
          "d",
          1e9,
          "p" + (char) ('a' + c),
          0,
          ids,
          java.util.Arrays.stream(ids).map(i -> i * 1000 + point * 10).toArray());
    }
    List<java.util.Map<String, Object>> rows = hops.rows();
    equal(19, rows.size());
    for (int c = 0; c < 19; c++) {
      equal("p" + (char) ('a' + c), rows.get(c).get("from_channel"));
      equal(256L, rows.get(c).get("count"));
      equal(10e-9, rows.get(c).get("max_s"));
    }
    equal(0L, hops.counts()[3]); // nothing left out
  }

  /**
   * The driver's memory for the tab of an application of 1,000,000 tasks (200 stages of 5,000) and
   * 10,000 channels (200 executors of 50, each sending counters and 256 samples a channel, ids that
   * pass every channel: the hops full), measured as the heap they hold after a collection: under
   * the bounds the README states (7 MB for the stages; the hops' 32 MB at the very most).
   */
  public static void testTheDriversMemoryForAMillionTasksAndTenThousandChannelsIsBounded() {
    long before = heapAfterGc();
    LiveStages stages = new LiveStages(new TabWork());
    for (int s = 0; s < 200; s++) {
      stages.submitted(s, 0, "stage " + s, 0);
      for (long t = 0; t < 5000; t++)
        stages.ended(s, 0, task(s * 5000L + t, 100 + t % 97, 0, 0, 0));
    }
    long afterStages = heapAfterGc();
    LiveExecutors executors = new LiveExecutors();
    LiveHops hops = new LiveHops((d, t) -> null, 1_000_000_000L, () -> 0);
    long[] ids = new long[256];
    for (int e = 0; e < 200; e++) {
      List<Messages.ChannelCount> channels = new ArrayList<>();
      for (int c = 0; c < 50; c++) {
        String name = "executor-" + e + ".channel-" + c;
        channels.add(new Messages.ChannelCount(name, 1_000_000, 0, 1000, 0));
        for (int i = 0; i < ids.length; i++) ids[i] = (long) e * 1_000_000 + i;
        hops.add("d", 1e9, name, 0, ids, ids.clone());
      }
      executors.update(new Messages.Counters("" + e, 1, 0, 1, 1, 1, channels, 0, 1, 1, 1));
    }
    long after = heapAfterGc();
    double stagesMb = (afterStages - before) / 1e6, restMb = (after - afterStages) / 1e6;
    System.out.printf(
        "the tab's driver memory: %.1f MB for 1,000,000 tasks in 200 stages, %.1f MB for 10,000"
            + " channels' counters and samples%n",
        stagesMb, restMb);
    equal(200, stages.newestFirst(LiveStages.STAGES_KEPT).size()); // all still held
    equal(10_000, executors.all().stream().mapToInt(c -> c.channels().size()).sum());
    equal(
        (long) LiveFigures.CHANNEL_ROWS, (long) figuresOf(executors, hops).path("channels").size());
    check(stagesMb < 7, () -> stagesMb + " MB for the stages");
    check(restMb < 32, () -> restMb + " MB for the channels");
  }

  /**
   * The heap in use after a full collection (twice: what the first finalizes goes in the second).
   */
  private static long heapAfterGc() {
    System.gc();
    System.gc();
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  /**
   * The sketch's buckets are the analysis's (cloudprofiler.analysis.sketch.keys and values of 1,
   * 1000, -2.5, 0 and 123456789 ns); a quantile read the other way round is the mirror rank's.
   */
  public static void testTheHopSketchHasTheAnalysisBuckets() {
    double[] v = {1, 1000, -2.5, 0, 123456789};
    int[] keys = {692, 1383, -784, 0, 2555};
    double[] values = {
      0.9972934327668257, 999.5921517988334, -2.502518012974016, 0, 122969266.43339959
    };
    for (int i = 0; i < v.length; i++) {
      equal(keys[i], HopSketch.key(v[i]));
      double expected = values[i], got = HopSketch.value(keys[i]);
      check(Math.abs(got - expected) <= 1e-9 * Math.abs(expected), () -> got + " vs " + expected);
    }
    HopSketch s = new HopSketch();
    for (int i = 1; i <= 100; i++) s.add(i, 0, false);
    equal(HopSketch.value(HopSketch.key(50)), s.quantile(0.5, false));
    equal(-HopSketch.value(HopSketch.key(51)), s.quantile(0.5, true)); // rank 50 of -100..-1
    equal(100.0, s.quantile(1, false)); // clipped to the max
    equal(-1.0, s.quantile(1, true));
  }

  public static void testMalformedFiguresRenderWithGapsNotErrors() throws Exception {
    ObjectMapper json = new ObjectMapper();
    for (String figures :
        new String[] {
          "{}",
          "[1, 2]",
          "{\"stages\": [{}], \"streaming\": [{\"batches\": [{}]}], \"operators\": [{}],"
              + " \"executors\": [{}], \"channels\": [{}], \"calibration\": [{}]}",
          "{\"stages\": [{\"stage_id\": \"x\", \"slowest\": [{}], \"median_ms\": \"y\"}],"
              + " \"streaming\": 3}"
        }) {
      JsonNode tree = json.readTree(figures);
      String html = new TabContent(() -> tree, false).html(null);
      check(html.contains("<h4>Stages</h4>"), () -> figures + ": " + html);
      PrometheusText.of(tree);
    }
  }
}
