package io.cloudprofiler.spark.sql;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The operators of the latest {@link #EXECUTIONS} instrumented SQL executions, summed over their
 * task attempts as the tasks end, for the Cloudprofiler tab and its metrics: per probe its rows,
 * its time with its children (inclusive) and its own (exclusive) in TSC ticks. A probe's exclusive
 * ticks in a task are its ticks minus those of its children in the same task, clipped at 0, as the
 * analysis computes them from the operator tables.
 */
public final class LiveOperators {
  static final int EXECUTIONS = 20;

  /** A probe's place and its sums: rows, inclusive and exclusive ticks, tasks. */
  private static final class Probe {
    final long id;
    final long parent;
    final String operator;
    final long execution;
    long rows;
    long inclusive;
    long exclusive;
    long tasks;

    Probe(long id, long parent, String operator, long execution) {
      this.id = id;
      this.parent = parent;
      this.operator = operator;
      this.execution = execution;
    }
  }

  /** Execution id -> its probes, in the order they were placed; the newest executions last. */
  private final LinkedHashMap<Long, List<Probe>> executions =
      new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, List<Probe>> eldest) {
          if (size() <= EXECUTIONS) return false;
          for (Probe p : eldest.getValue()) probes.remove(p.id);
          return true;
        }
      };

  private final Map<Long, Probe> probes = new HashMap<>();

  /** A probe placed in the plan of SQL execution {@code execution} (null: none, not kept). */
  synchronized void placed(long probe, long parent, String operator, Long execution) {
    if (execution == null) return;
    Probe p = new Probe(probe, parent, operator, execution);
    executions.computeIfAbsent(execution, e -> new ArrayList<>()).add(p);
    probes.put(probe, p);
  }

  /** One task attempt's values: probe -> {rows, ticks}. */
  synchronized void taskEnded(Map<Long, long[]> values) {
    Map<Long, Long> children = new HashMap<>();
    for (Map.Entry<Long, long[]> v : values.entrySet()) {
      Probe p = probes.get(v.getKey());
      if (p != null && p.parent != OperatorNodes.NO_PROBE)
        children.merge(p.parent, v.getValue()[1], Long::sum);
    }
    for (Map.Entry<Long, long[]> v : values.entrySet()) {
      Probe p = probes.get(v.getKey());
      if (p == null) continue;
      long ticks = v.getValue()[1];
      p.rows += v.getValue()[0];
      p.inclusive += ticks;
      p.exclusive += Math.max(0, ticks - children.getOrDefault(p.id, 0L));
      p.tasks++;
    }
  }

  /**
   * The probes that timed a task, newest execution first, as rows {sql_execution_id, probe_id,
   * parent_probe_id, operator, tasks, rows, inclusive_s, exclusive_s}: ticks turned into seconds at
   * {@code hz} (the driver's TSC; the analysis takes each executor's).
   */
  public synchronized List<Map<String, Object>> rows(double hz) {
    List<Map<String, Object>> out = new ArrayList<>();
    List<List<Probe>> newestFirst = new ArrayList<>(executions.values());
    for (int i = newestFirst.size() - 1; i >= 0; i--) {
      for (Probe p : newestFirst.get(i)) {
        if (p.tasks == 0) continue;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("sql_execution_id", p.execution);
        r.put("probe_id", p.id);
        r.put("parent_probe_id", p.parent == OperatorNodes.NO_PROBE ? null : p.parent);
        r.put("operator", p.operator);
        r.put("tasks", p.tasks);
        r.put("rows", p.rows);
        r.put("inclusive_s", p.inclusive / hz);
        r.put("exclusive_s", p.exclusive / hz);
        out.add(r);
      }
    }
    return out;
  }
}
