package io.cloudprofiler.spark.ui;

import io.cloudprofiler.spark.TaskTimes;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.scheduler.TaskInfo;

/**
 * What the Cloudprofiler tab shows of the stages while the application runs: per stage attempt of
 * the latest {@link #STAGES_KEPT}, its tasks' durations (Spark's, launch to finish; a uniform
 * sample of {@link #SAMPLE} per stage, exact below that), how many took over {@link
 * #STRAGGLER_RATIO} x its median and, for its {@link #SLOWEST} slowest, where their time went in
 * Spark's metrics. Memory is bounded by those constants whatever the application's size.
 */
public final class LiveStages extends SparkListener {
  /**
   * Spark's own threshold for a speculative copy (spark.speculation.multiplier), as the analysis.
   */
  static final double STRAGGLER_RATIO = 1.5;

  static final int STAGES_KEPT = 200;
  static final int SAMPLE = 4096;
  static final int SLOWEST = 3;

  /** A finished task attempt, as the tab names it. */
  record Task(
      long taskId,
      int partition,
      String executor,
      String host,
      long durationMs,
      long gcMs,
      long fetchWaitMs,
      long schedulerDelayMs) {}

  /** One stage attempt's figures so far. */
  static final class Stage {
    final int id;
    final int attempt;
    final String name;
    final long submittedMs;
    boolean completed;
    long tasks;
    long failed;
    long[] sample = new long[16]; // grown as tasks end, up to SAMPLE
    int sampled;
    final List<Task> slowest = new ArrayList<>();
    private final SplittableRandom random;

    Stage(int id, int attempt, String name, long submittedMs) {
      this.id = id;
      this.attempt = attempt;
      this.name = name;
      this.submittedMs = submittedMs;
      this.random = new SplittableRandom(((long) id << 16) ^ attempt);
    }

    /** Reservoir sampling: every successful attempt is in the sample with the same chance. */
    void add(Task task) {
      tasks++;
      if (sampled < SAMPLE) {
        if (sampled == sample.length) sample = Arrays.copyOf(sample, Math.min(SAMPLE, 2 * sampled));
        sample[sampled++] = task.durationMs();
      } else {
        long slot = random.nextLong(tasks - failed);
        if (slot < SAMPLE) sample[(int) slot] = task.durationMs();
      }
      slowest.add(task);
      slowest.sort((a, b) -> Long.compare(b.durationMs(), a.durationMs()));
      if (slowest.size() > SLOWEST) slowest.remove(SLOWEST);
    }

    /** The sample's durations, sorted. */
    long[] sorted() {
      long[] values = Arrays.copyOf(sample, sampled);
      Arrays.sort(values);
      return values;
    }

    /**
     * Whether every successful attempt's duration is in the sample (else figures are estimates).
     */
    boolean exact() {
      return tasks - failed <= SAMPLE;
    }
  }

  private final Map<List<Integer>, Stage> stages =
      new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<List<Integer>, Stage> eldest) {
          return size() > STAGES_KEPT;
        }
      };

  private final TabWork work;

  /** {@code work}: where the listener's time counts. */
  public LiveStages(TabWork work) {
    this.work = work;
  }

  @Override
  public synchronized void onStageSubmitted(SparkListenerStageSubmitted event) {
    long began = System.nanoTime();
    StageInfo info = event.stageInfo();
    submitted(
        info.stageId(),
        info.attemptNumber(),
        info.name(),
        info.submissionTime().isDefined()
            ? (Long) info.submissionTime().get()
            : System.currentTimeMillis());
    work.since(TabWork.Part.LISTENERS, began);
  }

  /** A stage attempt submitted, as its event says. */
  synchronized void submitted(int stageId, int attempt, String name, long submittedMs) {
    stages.put(List.of(stageId, attempt), new Stage(stageId, attempt, name, submittedMs));
  }

  @Override
  public synchronized void onStageCompleted(SparkListenerStageCompleted event) {
    Stage stage =
        stages.get(List.of(event.stageInfo().stageId(), event.stageInfo().attemptNumber()));
    if (stage != null) stage.completed = true;
  }

  @Override
  public synchronized void onTaskEnd(SparkListenerTaskEnd event) {
    long began = System.nanoTime();
    try {
      taskEnded(event);
    } finally {
      work.since(TabWork.Part.LISTENERS, began);
    }
  }

  private void taskEnded(SparkListenerTaskEnd event) {
    TaskInfo info = event.taskInfo();
    TaskMetrics m = event.taskMetrics();
    ended(
        event.stageId(),
        event.stageAttemptId(),
        !info.successful()
            ? null
            : new Task(
                info.taskId(),
                info.partitionId(),
                info.executorId(),
                info.host(),
                info.finishTime() - info.launchTime(),
                m == null ? 0 : m.jvmGCTime(),
                m == null ? 0 : m.shuffleReadMetrics().fetchWaitTime(),
                m == null ? 0 : TaskTimes.schedulerDelay(info, m)));
  }

  /** A task attempt of a stage attempt ended: {@code task}, or null where it failed. */
  synchronized void ended(int stageId, int attempt, Task task) {
    Stage stage = stages.get(List.of(stageId, attempt));
    if (stage == null) return; // submitted before the plugin's listener, or evicted
    if (task == null) {
      stage.tasks++;
      stage.failed++;
      return;
    }
    stage.add(task);
  }

  /**
   * The newest {@code limit} stages kept, newest first, copied under the lock: the tab renders them
   * outside it.
   */
  synchronized List<Stage> newestFirst(int limit) {
    List<Stage> copy = new ArrayList<>();
    int skip = Math.max(0, stages.size() - limit);
    for (Stage s : stages.values()) {
      if (skip-- > 0) continue;
      Stage c = new Stage(s.id, s.attempt, s.name, s.submittedMs);
      c.completed = s.completed;
      c.tasks = s.tasks;
      c.failed = s.failed;
      c.sample = Arrays.copyOf(s.sample, s.sampled);
      c.sampled = s.sampled;
      c.slowest.addAll(s.slowest);
      copy.add(0, c);
    }
    return copy;
  }
}
