package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.util.TaskCompletionListener;

/**
 * What one operator probe measures in one task: the rows its operator produced, and the time the
 * operator and its children in the task took to produce them (inclusive time), from the gaps
 * between consecutive rows at the probe: a gap starts when the parent operators are done with a row
 * and ends when the next row arrives (the first starts with the pipeline, the last ends with it),
 * less the time the pipeline spent returned to its consumer meanwhile.
 *
 * <p>Which gaps are timed, and what a timed gap stands for, is {@link GapSample}'s: the first 64
 * all, then a random one in 64, and past 16,384 rows one in 256. The inclusive time is the exact
 * gaps' sum plus the sampled gaps' time per row of the probe below times the rows of the gaps they
 * stand for ({@link GapEstimate}), with its standard error: both go out, with the rows, in the
 * probe's SQL metrics when the task completes.
 *
 * <p>A gap that spans {@link #LONG_GAP} or more rows of the probe below (a filter or a join that
 * passes few of them, the gap after the last row) is timed exactly from the first of that probe's
 * own timed rows that finds it so long, whether sampled or not: that tail counts exactly, and only
 * the gap's head, from its start to that row, is sampled as a short gap is. Else one long gap,
 * missed or counted 64 times, made the estimate, and a standard error computed from short gaps did
 * not show it. The probe below looks only at its timed rows, so the rows that are not timed pay
 * nothing for it: a count of the rows between, per row, cost as much as the rest of the probe's
 * work.
 *
 * <p>Generated code calls {@link #arrives} as a row arrives and {@link #left} once the parents are
 * done with it: a row that is not timed costs a decrement and two comparisons. Both are a few bytes
 * of bytecode, which the JIT inlines whatever the call site, so that a probe adds 14 bytes to the
 * generated method that holds it: a method of Spark's generated code called per row (an
 * aggregation's consume function) stays under the JIT's limit for inlining a hot method (325 bytes)
 * as long as it can, which the same code written out in each place (45 bytes a probe) crossed. Used
 * by the task's thread only.
 */
public final class ProbeCounters implements TaskCompletionListener {
  /**
   * Rows of the probe below in one gap from which the rest of the gap is timed exactly. Found at
   * the probe below's timed rows only, so that a long gap's two TSC reads cost at most what the
   * probe below pays for its own rows, where a count per row would make a probe above a selective
   * filter pay more than the filter's; and a gap's head of a few of the sample's periods of the
   * child's rows, sampled, is a short gap's like any other.
   */
  static final int LONG_GAP = GapSample.SAMPLE_EVERY;

  /** Rows until the next one whose gap is timed; read and decremented by the generated code. */
  public long countdown = 1;

  /**
   * At the first probe of a chain ({@link OperatorRows}): the id of the row passing now, and
   * whether it is sampled; read by the probes above it in the same iteration of the pipeline's
   * loop.
   */
  public long rowId;

  public boolean rowSampled;

  /**
   * Below a Python UDF, at a probe that continues the chain below it: the id of its own row passing
   * now, numbered as the probe above the UDF numbers the UDF's rows ({@link
   * OperatorRows#UDF_ROWS}).
   */
  public long udfRowId;

  /**
   * The probes whose rows come from this one, nearest first: in the same generated code, and the
   * probe of the operator that takes this pipeline's rows in another pipeline of the task (a merge
   * join above its inputs). At each of its timed rows this probe looks for a long gap at them
   * ({@link #watchAbove}).
   */
  private ProbeCounters[] above = {};

  /** Per probe above: its rows when this probe last saw them change, and this probe's row then. */
  private long[] seenRows = {};

  private long[] seenAt = {};

  /**
   * The probes of the task running on this thread, by id, so that a probe finds the probe above it
   * in another pipeline, whichever is made first; emptied as the task completes. Pipelines that run
   * on a thread of their own (a Python UDF's input on Spark 3.5) meet none.
   */
  private static final ThreadLocal<TaskProbes> TASK_PROBES = new ThreadLocal<>();

  private static final class TaskProbes {
    final long attempt;
    final java.util.Map<Long, ProbeCounters> byId = new java.util.HashMap<>();

    TaskProbes(long attempt) {
      this.attempt = attempt;
    }
  }

  /**
   * The channel of this probe's sampled rows (0: none), taken with the pipeline rather than at its
   * first row, so that no row's latency holds the opening of a file, and released as the task
   * completes, so that it may close once no task uses it ({@link OperatorRows#acquire}).
   */
  private final long rowChannel;

  /** The probe whose row ids this probe logs: its chain's first, or a Python UDF's input's. */
  private final long firstProbe;

  /** The countdowns given so far, summed: the rows so far are {@code issued - countdown}. */
  private long issued = 1;

  private final PipelineClock clock;
  private final ProbeMetrics metrics;
  private final GapSample sample;

  /**
   * The open gap: its start's TSC (0: the pipeline's start), and the clock's outside time and batch
   * ticks then.
   */
  private boolean open;

  private long from;
  private long outsideFrom;
  private long batchesFrom;

  /** Whether the open gap is a long gap's tail (timed exactly). */
  private boolean tail;

  /** The countdown held back while a tail makes the next row end the gap. */
  private long held;

  /** The probe whose rows come to this one in the same generated code (null: none). */
  private final ProbeCounters below;

  /** The rows of the probe below (this probe's own where none is) at the open gap's start. */
  private long rowsFrom;

  private final GapEstimate sum = new GapEstimate();

  /**
   * The time with its children in this task and its standard error, in ticks, once the task ends;
   * made to agree with the pipeline's other probes' before they are published ({@link
   * PipelineClock#ended}).
   */
  double estimate = Double.NaN;

  double error = Double.NaN;

  /**
   * A probe of the chain that {@code first} starts (null: none), which logs the ids {@code first}
   * gives, and whose rows come from {@code below} in the same generated code (null: none), which
   * then watches it for long gaps.
   */
  public ProbeCounters(
      PipelineClock clock, ProbeMetrics metrics, ProbeCounters first, ProbeCounters below) {
    this.clock = clock;
    this.metrics = metrics;
    TaskContext task = TaskContext.get();
    long attempt = task == null ? 0 : task.taskAttemptId();
    rowId = OperatorRows.firstId(attempt, metrics.udfEnd);
    udfRowId = OperatorRows.firstId(attempt, true);
    firstProbe = first == null ? metrics.rowsOf : first.firstProbe;
    rowChannel =
        clock.timed && task != null && metrics.chain != ProbeMetrics.NO_CHAIN
            ? OperatorRows.acquire(metrics, firstProbe)
            : 0;
    sample =
        new GapSample(
            (metrics.probe * 0x9E3779B97F4A7C15L) ^ (task == null ? 0 : task.partitionId()) ^ 1L);
    if (task != null) {
      task.addTaskCompletionListener(this);
      clock.join(this);
    }
    clock.add(BatchTimes.take(metrics.probe));
    this.below = below;
    if (below != null) below.watch(this);
    if (clock.timed) {
      open = true; // the first gap starts with the pipeline
      clock.open++;
      if (task != null) meetAcrossPipelines(task.taskAttemptId());
    }
  }

  /**
   * Looks for long gaps at {@code probe}, whose rows come from this one, at this one's timed rows.
   */
  private void watch(ProbeCounters probe) {
    int n = above.length;
    above = java.util.Arrays.copyOf(above, n + 1);
    above[n] = probe;
    seenRows = java.util.Arrays.copyOf(seenRows, n + 1);
    seenAt = java.util.Arrays.copyOf(seenAt, n + 1);
  }

  /**
   * Links this probe with the probes of the task's other pipelines whose rows it takes or which
   * take its rows. A merge join's pipeline reads its inputs' pipelines: the gap after its last row
   * holds the rest of their reading, and no probe below it in its own pipeline would find that gap
   * long, so its inputs' probes look for it.
   */
  private void meetAcrossPipelines(long attempt) {
    TaskProbes task = TASK_PROBES.get();
    if (task == null || task.attempt != attempt) TASK_PROBES.set(task = new TaskProbes(attempt));
    ProbeCounters parent = task.byId.get(metrics.parent);
    if (parent != null && parent.clock != clock) watch(parent);
    for (ProbeCounters child : task.byId.values()) {
      if (child.metrics.parent == metrics.probe && child.clock != clock) child.watch(this);
    }
    task.byId.put(metrics.probe, this);
  }

  /**
   * Logs a sampled row's id as it reaches this probe; where the library cannot load or the channel
   * cannot open, nothing.
   */
  public void logRow(long id) {
    if (rowChannel != 0) CloudProfiler.log(rowChannel, id);
  }

  /**
   * Logs a sampled row's id as it reaches this probe, the top of its chain, and the shuffle
   * partitions the rows it makes go to, at one TSC ({@link ShuffledRows}).
   */
  public void logRow(long id, ArrayData partitions) {
    if (rowChannel == 0) return;
    long tsc = CloudProfiler.tsc();
    CloudProfiler.logAt(rowChannel, id, tsc);
    ShuffledRows.log(id, partitions, tsc);
  }

  /** A row arrives: it ends the gap when its gap is timed. */
  public void arrives() {
    if (--countdown == 0L) gapEnds();
  }

  /** The parents are done with the row: the gap starts when the next row's is timed. */
  public void left() {
    if (countdown == 1L) gapStarts();
  }

  /** The rows that arrived so far. */
  long rows() {
    return issued - countdown;
  }

  /** A row whose gap is timed arrived: the gap ends. */
  private void gapEnds() {
    long row = issued - 1; // countdown is 0: this row is the issued-th
    if (above.length > 0) watchAbove(row);
    if (open) close(PipelineClock.now(), row);
    if (held > 0) { // the row ended a tail: the sample's countdown goes on where it was
      countdown = held;
      issued += held;
      held = 0;
      return;
    }
    long skip = sample.skip(row);
    countdown = skip;
    issued += skip;
  }

  /** The next row's gap is timed and starts now: the parents are done with this row. */
  private void gapStarts() {
    if (open || !clock.timed) return;
    open = true;
    clock.open++;
    startsAt(PipelineClock.now());
  }

  /**
   * The open gap (or its tail) starts at TSC {@code now}: what it must leave out or count from
   * here.
   */
  private void startsAt(long now) {
    from = now;
    outsideFrom = clock.outside;
    batchesFrom = clock.batchTicks();
    rowsFrom = rowsBelow();
  }

  /**
   * At this probe's timed row {@code row}: a probe above that had no row since this probe's row
   * {@link #LONG_GAP} or more rows back is in a long gap, and so is every probe above it (their
   * rows come through it).
   */
  private void watchAbove(long row) {
    for (int i = 0; i < above.length; i++) {
      long rows = above[i].rows();
      if (rows != seenRows[i]) {
        seenRows[i] = rows;
        seenAt[i] = row;
      } else if (row - seenAt[i] >= LONG_GAP) {
        above[i].longGapUp();
      }
    }
  }

  private void longGapUp() {
    longGap();
    for (ProbeCounters probe : above) probe.longGapUp();
  }

  /**
   * The current gap has spanned {@link #LONG_GAP} rows of the probe below: the rest of it is timed
   * exactly. A gap already timed by the sample ends its head here; one that is not starts now, and
   * the next row ends it (the countdown is held back until then).
   */
  private void longGap() {
    if (!clock.timed || tail) return;
    long now = PipelineClock.now();
    if (open) {
      record(now, rows());
    } else {
      open = true;
      clock.open++;
      held = countdown - 1;
      issued -= held;
      countdown = 1;
    }
    tail = true;
    startsAt(now);
  }

  private void close(long to, long gap) {
    record(to, gap);
    open = false;
    tail = false;
    clock.open--;
    from = 0;
  }

  /**
   * Counts the open gap's time up to {@code to}: exact, sampled or its tail; less the batches it
   * waited for, which count exactly apart.
   */
  private void record(long to, long gap) {
    long away = clock.outside - outsideFrom + clock.batchTicks() - batchesFrom;
    long ticks = PipelineClock.gap(from != 0 ? from : clock.began(), to - away);
    sum.add(ticks, rowsBelow() - rowsFrom, tail ? 1 : GapSample.weight(gap));
  }

  /**
   * The rows of the probe below so far: each comes in one gap of this probe; with none, its own.
   */
  private long rowsBelow() {
    return below != null ? below.rows() : rows();
  }

  /** The task ends: the gap after the last row ends with the pipeline's last call. */
  @Override
  public void onTaskCompletion(TaskContext context) {
    TASK_PROBES.remove();
    try {
      estimateTime();
    } finally {
      if (rowChannel != 0) OperatorRows.release(metrics.probe);
      clock.ended(); // the last of the pipeline's probes to end publishes them all
    }
  }

  /** This task's time with its children and its standard error, from the gaps timed. */
  private void estimateTime() {
    if (open) close(clock.lastLeft(), rows());
    // the pipeline's batches came while this probe was between rows: all of them are its time
    long allRows = rowsBelow();
    double estimate = sum.ticks(allRows) + clock.batchTicks();
    double error = sum.error(allRows);
    // The gaps lie between the pipeline's start and now, so their sum cannot exceed that span: the
    // bound takes in the rare sampled gap that held a long stall of the thread (preempted on a
    // loaded host, a GC pause), which the estimate would count 1 / its probability times.
    if (clock.timed && clock.began != 0) {
      double span = Math.max(0, PipelineClock.now() - clock.began);
      estimate = Math.min(estimate, span);
      error = Math.min(error, span);
    }
    this.estimate = estimate;
    this.error = error;
  }

  long probe() {
    return metrics.probe;
  }

  /** The probe of the operator that consumes this one's rows, in this pipeline or another. */
  long parentProbe() {
    return metrics.parent;
  }

  /** Sends this task's figures with its SQL metrics: its rows alone where its time is unknown. */
  void publish() {
    boolean known = Double.isFinite(estimate) && Double.isFinite(error);
    metrics.publish(
        rows(),
        known ? Math.round(estimate) : 0,
        known ? Math.round(error) : 0,
        known ? sum.gaps() : 0);
  }
}
