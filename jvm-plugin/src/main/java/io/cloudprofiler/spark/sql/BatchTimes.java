package io.cloudprofiler.spark.sql;

import io.cloudprofiler.spark.Guard;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.util.TaskCompletionListener;

/**
 * The time a pipeline's columnar input (a scan's batches under a {@code ColumnarToRow}) takes to
 * hand over its batches in one task, timed exactly: two TSC reads a batch of thousands of rows.
 *
 * <p>Why: a scan decodes a whole batch as its first row is asked for, so one gap in 4,096 at every
 * probe of the pipeline holds the batch's decoding, and a sample of gaps hits those few or misses
 * them: before, a TPC-H scan's time came out as 1.28 s with a standard error of 0.88 s, and each
 * operator above it as uncertain. Timed apart, the batches' time counts exactly in every probe of
 * the pipeline (each probe is between rows whenever the pipeline asks for a batch: the operators
 * above have returned), and the sampled gaps hold only the rows' own work, of like lengths.
 */
@SuppressWarnings({"unchecked", "rawtypes"}) // the RDDs' items are ColumnarBatch, typed as rows
final class BatchTimes implements Iterator<Object> {
  private static final Guard GUARD = new Guard("operator timing (a scan's batches)");

  /** Made on the task's thread as its pipeline's input, taken by the probe's counters at init. */
  private static final ThreadLocal<Map<Long, BatchTimes>> MADE =
      ThreadLocal.withInitial(HashMap::new);

  private final Iterator<?> in;

  /** TSC ticks spent in the input's {@code hasNext} and {@code next}, less the timing's own. */
  long ticks;

  private BatchTimes(Iterator<?> in) {
    this.in = in;
  }

  /**
   * {@code rdds}, each partition's batches timed for the probe {@code probe}'s pipeline; where that
   * fails, {@code rdds} as they are (the probes then sample the batches with the rows).
   */
  static List<RDD<InternalRow>> timed(List<RDD<InternalRow>> rdds, long probe) {
    if (GUARD.disabled()) return rdds;
    try {
      return rdds.stream()
          .map(
              rdd ->
                  (RDD<InternalRow>)
                      rdd.toJavaRDD().mapPartitions(in -> (Iterator) made(in, probe), true).rdd())
          .toList();
    } catch (Throwable e) {
      GUARD.disable("timing a scan's batches", e);
      return rdds;
    }
  }

  private static Iterator<?> made(Iterator<?> in, long probe) {
    if (GUARD.disabled() || !PipelineClock.timing()) return in;
    try {
      BatchTimes times = new BatchTimes(in);
      Map<Long, BatchTimes> made = MADE.get();
      made.put(probe, times);
      TaskContext task = TaskContext.get();
      // where the pipeline falls out of code generation no probe takes it
      if (task != null)
        task.addTaskCompletionListener(
            (TaskCompletionListener) context -> made.remove(probe, times));
      return times;
    } catch (Throwable e) {
      GUARD.disable("timing a scan's batches", e);
      return in;
    }
  }

  /** The batches of the probe {@code probe}'s input made on this thread, else null. */
  static BatchTimes take(long probe) {
    return MADE.get().remove(probe);
  }

  @Override
  public boolean hasNext() {
    return timed(in::hasNext);
  }

  @Override
  public Object next() {
    return timed(in::next);
  }

  /** A call into the input (a scan decodes its next batch in hasNext), its ticks added. */
  private <T> T timed(Supplier<T> call) {
    long from = PipelineClock.now();
    try {
      return call.get();
    } finally {
      ticks += PipelineClock.gap(from, PipelineClock.now());
    }
  }
}
