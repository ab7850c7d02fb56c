package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.Guard;
import org.apache.spark.SparkEnv;

/**
 * The time of one whole-stage-codegen pipeline in one task, as its operator probes need it: when
 * the pipeline first ran, and the time it spent outside its {@code processNext} (its consumer
 * working on the rows it returned) while some probe was timing a gap between rows, which that gap
 * must not count. Made by the generated code of the pipeline's top probe, one per task; read and
 * written by the task's thread only. TSC reads happen only while a gap is open, so that a pipeline
 * none of whose probes is timing pays two field reads per call.
 */
public final class PipelineClock {
  private static final Guard GUARD = new Guard("operator timing");
  private static final Guard NESTING = new Guard("operator timing's agreement between probes");

  /** False where the native library cannot load: the probes then count rows only. */
  public final boolean timed;

  /** TSC at the pipeline's first {@code processNext}; 0 before it. */
  long began;

  /** Gaps being timed by this pipeline's probes. */
  int open;

  /** TSC at the last return from {@code processNext} while a gap was open. */
  long left;

  /** Ticks spent outside {@code processNext} while gaps were open, summed. */
  long outside;

  /**
   * The ticks a timed gap counts for the timing itself, subtracted from each: one TSC read through
   * JNI, as back-to-back reads differ by once compiled (the median of the last of 20,000). Measured
   * once per JVM, when its first pipeline is timed (about a millisecond).
   */
  private static long overhead = -1;

  /** The columnar inputs of the pipeline whose batches are timed apart from its rows. */
  private BatchTimes[] batches = {};

  /** The pipeline's probes in this task, and how many of them have yet to end ({@link #ended}). */
  private ProbeCounters[] probes = {};

  private int ending;

  public PipelineClock() {
    timed = timing();
    if (timed && overhead < 0) overhead = measureOverhead();
  }

  /** Whether the probes time anything: the native library loads and no failure disabled them. */
  static boolean timing() {
    return !GUARD.disabled() && loads();
  }

  private static synchronized long measureOverhead() {
    if (overhead >= 0) return overhead;
    long[] last = new long[1001];
    for (int i = 0; i < 20_000; i++) {
      long a = now();
      last[i % last.length] = now() - a;
    }
    java.util.Arrays.sort(last);
    return last[last.length / 2];
  }

  /** The ticks of a gap from {@code from} to {@code to}, less the timing's own. */
  static long gap(long from, long to) {
    return Math.max(0, to - from - overhead);
  }

  private static boolean loads() {
    try {
      SparkEnv env = SparkEnv.get();
      String failure = NativeLoader.load(env == null ? null : Config.NATIVE_PATH.text(env.conf()));
      if (failure == null) return true;
      GUARD.disable("loading the native library", new IllegalStateException(failure));
    } catch (Throwable e) {
      GUARD.disable("loading the native library", e);
    }
    return false;
  }

  static long now() {
    return CloudProfiler.tsc();
  }

  /**
   * At each entry into the pipeline's {@code processNext}. While a gap is open, the time since the
   * last return is the consumer's, and so is the cost of one TSC read: the return's read before it
   * took its TSC and this one after it took its own lie inside the gap, and a gap that is not timed
   * pays neither. Left in, each sampled gap stood for more time than the gaps it stands for took:
   * 20-25 ns a row on a sort's output that a merge join reads one row at a time.
   */
  public void enter() {
    if (!timed) return;
    if (began == 0) began = now();
    else if (open > 0 && left != 0) {
      outside += now() - left + overhead;
      left = 0;
    }
  }

  /** At each return from the pipeline's {@code processNext}, however it returns. */
  public void leave() {
    if (open > 0) left = now();
  }

  /** Adds a columnar input of the pipeline, whose batches are timed apart (null: none). */
  void add(BatchTimes input) {
    if (input == null) return;
    batches = java.util.Arrays.copyOf(batches, batches.length + 1);
    batches[batches.length - 1] = input;
  }

  /** Adds a probe of the pipeline in this task, which says when it ends ({@link #ended}). */
  void join(ProbeCounters probe) {
    probes = java.util.Arrays.copyOf(probes, probes.length + 1);
    probes[probes.length - 1] = probe;
    ending++;
  }

  /**
   * A probe's time in this task is estimated; once every probe's is, their times are made to agree
   * with one another ({@link NestedTimes}) and each is published. If that fails, it is turned off
   * with one log line and the estimates go out as they are.
   */
  void ended() {
    if (--ending > 0) return;
    try {
      if (timed && !NESTING.disabled()) settle();
    } catch (Throwable e) {
      NESTING.disable("making a pipeline's times agree", e);
    } finally {
      for (ProbeCounters probe : probes) probe.publish();
    }
  }

  private void settle() {
    int n = probes.length;
    double[] estimate = new double[n];
    double[] error = new double[n];
    int[] above = new int[n];
    java.util.Map<Long, Integer> index = new java.util.HashMap<>();
    for (int i = 0; i < n; i++) index.put(probes[i].probe(), i);
    for (int i = 0; i < n; i++) {
      estimate[i] = probes[i].estimate;
      error[i] = probes[i].error;
      above[i] = index.getOrDefault(probes[i].parentProbe(), -1);
      if (!Double.isFinite(estimate[i]) || !Double.isFinite(error[i])) return; // not estimated
    }
    if (!NestedTimes.settle(estimate, error, above, batchTicks())) return;
    for (int i = 0; i < n; i++) {
      probes[i].estimate = estimate[i];
      probes[i].error = error[i];
    }
  }

  /**
   * The ticks the pipeline's columnar inputs took to hand over their batches so far: in every
   * probe's time exactly, and in no gap's ({@link BatchTimes}).
   */
  long batchTicks() {
    long ticks = 0;
    for (BatchTimes input : batches) ticks += input.ticks;
    return ticks;
  }

  /** The TSC at which a gap that started before the first row started: the pipeline's start. */
  long began() {
    return began != 0 ? began : now();
  }

  /** The end of the pipeline's last call: where the gap after its last row ends. */
  long lastLeft() {
    return left != 0 ? left : now();
  }
}
