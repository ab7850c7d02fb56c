package io.cloudprofiler.spark.sql;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.joins.HashJoin;
import org.apache.spark.sql.types.TimestampType;

/**
 * The chains of a plan whose rows carry their event time: those below a streaming query's
 * watermark, whatever the source (Kafka, files, the rate source, ours). The top probe of such a
 * chain logs each sampled row's event time ({@link SourceRows#logEventTime}), and the chain's first
 * probe counts as a source's ({@link ProbeMetrics#source}), so that the analysis times those rows
 * from their event time to each operator and to the sink, as it times our generator's from their
 * delivery.
 *
 * <p>The watermark's operator reads the event time of every row its child's pipeline gives it; that
 * child is the chain's top, which builds the rows it hands over from all its columns anyway, so
 * reading the event time there for a sampled row changes nothing the query computes. The time is a
 * timestamp (microseconds since the epoch on the clock of whatever stamped the event); a timestamp
 * without time zone is no instant and is left out.
 */
final class EventTimes {
  private static final String WATERMARK = "EventTimeWatermark";

  /** The chains' tops, by operator (identity): the event time's ordinal in their output. */
  final Map<SparkPlan, Integer> tops = new IdentityHashMap<>();

  /** The chains' first operators (identity). */
  final Set<SparkPlan> firsts = Collections.newSetFromMap(new IdentityHashMap<>());

  private EventTimes() {}

  /** The chains below the watermarks of {@code plan}, with the rows' sample {@code rows} (XoY). */
  static EventTimes of(SparkPlan plan, long[] rows) {
    EventTimes found = new EventTimes();
    if (rows[0] != 0) found.search(plan, rows);
    return found;
  }

  /** Whether {@code node} is a watermark's operator, which reads its rows' event time. */
  static boolean reads(SparkPlan node) {
    return WATERMARK.equals(node.nodeName());
  }

  private void search(SparkPlan node, long[] rows) {
    if (reads(node)) below(node, rows);
    for (SparkPlan child : ScalaLists.toJava(node.children(), SparkPlan.class)) search(child, rows);
  }

  /** The chain below {@code watermark}, if its child starts or continues one. */
  private void below(SparkPlan watermark, long[] rows) {
    SparkPlan top = ScalaLists.toJava(watermark.children(), SparkPlan.class).get(0);
    int ordinal = ordinal(top, eventTime(watermark));
    if (ordinal < 0 || !OperatorProbes.probed(top, watermark)) return;
    SparkPlan parent = watermark, node = top;
    int chain = OperatorProbes.chain(node, parent, rows);
    while (chain == ProbeMetrics.NEXT) {
      SparkPlan next = streamed(node);
      if (!OperatorProbes.probed(next, node)) return;
      parent = node;
      node = next;
      chain = OperatorProbes.chain(node, parent, rows);
    }
    if (chain != ProbeMetrics.FIRST) return;
    tops.put(top, ordinal);
    firsts.add(node);
  }

  /** The child whose rows {@code node} (which keeps rows: {@link OperatorRows}) passes on. */
  private static SparkPlan streamed(SparkPlan node) {
    if (node instanceof HashJoin join) return join.streamedPlan();
    return ScalaLists.toJava(node.children(), SparkPlan.class).get(0);
  }

  /**
   * The watermark's event-time column: Spark 3.5 and 4.x name the operator's class in different
   * packages, both with this accessor.
   */
  private static Attribute eventTime(SparkPlan watermark) {
    try {
      return (Attribute) watermark.getClass().getMethod("eventTime").invoke(watermark);
    } catch (ReflectiveOperationException | ClassCastException e) {
      return null;
    }
  }

  /** The ordinal of {@code column} in {@code node}'s output where it is a timestamp, else -1. */
  private static int ordinal(SparkPlan node, Attribute column) {
    if (column == null || !(column.dataType() instanceof TimestampType)) return -1;
    List<Attribute> output = ScalaLists.toJava(node.output(), Attribute.class);
    for (int i = 0; i < output.size(); i++) {
      if (output.get(i).exprId().equals(column.exprId())) return i;
    }
    return -1;
  }
}
