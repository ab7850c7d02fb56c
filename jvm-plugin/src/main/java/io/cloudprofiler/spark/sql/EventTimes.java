package io.cloudprofiler.spark.sql;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.Exchange;
import org.apache.spark.sql.execution.joins.HashJoin;
import org.apache.spark.sql.types.StructType;
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
 *
 * <p>Above a watermark, where a chain's top still outputs the event-time column (the attribute
 * Spark marks with the watermark's delay: a projection, a repartition, a stream-stream join, a
 * deduplication keep it), its top logs the rows' event times too, and its first probe counts as a
 * source's: past an exchange, where the rows are new ones to the probes (another task, other
 * ordinals), as one of event times only ({@link #eventsOnly}: the source's delivery and emission
 * records, and the sink's, belong to the rows of the sources' own chains); in the watermark's own
 * stage where no chain below it logs them (its child generates no code: a deduplication, a
 * stream-stream join), as the chain the sink is timed from. One such chain per stage, and none in a
 * stage with a chain that logs its rows already (below a watermark, above our source): the chains
 * of one task number their rows alike, and two that both logged event times would give one id two
 * of them.
 *
 * <p>Past a windowed aggregation the rows are results: where a stage saves the aggregation's state,
 * the highest operator that outputs the window (marked as the event-time column is) logs each
 * sampled result's window end instead ({@link #results}), and the analysis times the results from
 * it.
 */
final class EventTimes {
  private static final String WATERMARK = "EventTimeWatermark";

  /**
   * The metadata key Spark puts on the event-time column's attribute (EventTimeWatermark.delayKey).
   */
  private static final String DELAY_KEY = "spark.watermarkDelayMs";

  /** The chains' tops, by operator (identity): the event time's ordinal in their output. */
  final Map<SparkPlan, Integer> tops = new IdentityHashMap<>();

  /** The chains' first operators (identity). */
  final Set<SparkPlan> firsts = Collections.newSetFromMap(new IdentityHashMap<>());

  /** Of {@link #firsts}, those of chains past an exchange, whose rows have event times only. */
  final Set<SparkPlan> eventsOnly = Collections.newSetFromMap(new IdentityHashMap<>());

  /**
   * Of {@link #tops}' operators, those that log a windowed aggregation's results' window ends: the
   * column at their ordinal is a window (a struct whose second field, its end, is a timestamp).
   */
  final Set<SparkPlan> windows = Collections.newSetFromMap(new IdentityHashMap<>());

  /** The stages (by the exchange above them, or the plan's root) that hold such a chain. */
  private final Set<SparkPlan> stagesWithChain = Collections.newSetFromMap(new IdentityHashMap<>());

  private EventTimes() {}

  /** The chains below the watermarks of {@code plan}, with the rows' sample {@code rows} (XoY). */
  static EventTimes of(SparkPlan plan, long[] rows) {
    EventTimes found = new EventTimes();
    if (rows[0] != 0) {
      found.search(plan, rows);
      walk(plan, null, plan, (node, parent, stage) -> found.results(node, parent, stage, rows));
      walk(plan, null, plan, (node, parent, stage) -> found.above(node, parent, stage, rows));
    }
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
    SparkPlan first = first(top, watermark, rows);
    if (first == null) return;
    tops.put(top, ordinal);
    firsts.add(first);
  }

  /** What {@link #walk} asks of each operator: with its parent and its stage. */
  private interface Visit {
    void at(SparkPlan node, SparkPlan parent, SparkPlan stage);
  }

  /**
   * {@code visit} at {@code node}, then at each operator below it, from the root down; {@code
   * stage}: the exchange above the operator (or the plan's root: a stage that adaptive execution
   * plans apart ends at its query stages, leaves of its plan).
   */
  private static void walk(SparkPlan node, SparkPlan parent, SparkPlan stage, Visit visit) {
    visit.at(node, parent, stage);
    for (SparkPlan child : ScalaLists.toJava(node.children(), SparkPlan.class))
      walk(child, node, node instanceof Exchange ? node : stage, visit);
  }

  /**
   * At {@code node} ({@link #walk}, once the chains below the watermarks are found): the chain
   * above a watermark whose top is {@code node}, where it outputs the event-time column.
   */
  private void above(SparkPlan node, SparkPlan parent, SparkPlan stage, long[] rows) {
    if (!stagesWithChain.contains(stage) && top(node, parent, rows)) {
      int ordinal = markedEventTime(node);
      SparkPlan first = ordinal < 0 ? null : first(node, parent, rows);
      if (first != null && !holds(stage, this::logsRows)) {
        tops.put(node, ordinal);
        firsts.add(first);
        if (!holds(stage, EventTimes::reads)) eventsOnly.add(first);
        stagesWithChain.add(stage);
      }
    }
  }

  /**
   * At {@code node} ({@link #walk}): the chain that passes on a windowed aggregation's results,
   * where {@code node} is, in a stage that saves an aggregation's state, the highest probed
   * operator that outputs the window (the column Spark marks with the watermark's delay): it logs
   * each sampled result's window end. Alone where its parent generates no code (the sink's write),
   * a chain of one.
   */
  private void results(SparkPlan node, SparkPlan parent, SparkPlan stage, long[] rows) {
    int ordinal = markedWindow(node);
    if (ordinal >= 0
        && !stagesWithChain.contains(stage)
        && OperatorProbes.probed(node, parent)
        && holds(stage, EventTimes::savesState)
        && !holds(stage, this::logsRows)) {
      SparkPlan first =
          OperatorProbes.chain(node, parent, rows) == ProbeMetrics.NEXT
              ? first(node, parent, rows)
              : node;
      if (first != null) {
        tops.put(node, ordinal);
        windows.add(node);
        firsts.add(first);
        stagesWithChain.add(stage);
      }
    }
  }

  /**
   * Whether {@code node} saves a streaming aggregation's state: what it outputs above are results
   * (StateStoreSaveExec, SessionWindowStateStoreSaveExec: by name, as Spark 3.5 and 4.x keep them
   * in different packages).
   */
  static boolean savesState(SparkPlan node) {
    return node.nodeName().endsWith("StateStoreSave");
  }

  /**
   * Whether {@code node} is the top of a chain whose rows are timed from a source: ours, or a
   * watermark's chain below it; not a chain of event times only past an exchange, nor one of a
   * windowed aggregation's results.
   */
  boolean sourcedTop(SparkPlan node, SparkPlan parent, long[] rows) {
    if (!top(node, parent, rows)) return false;
    SparkPlan first = first(node, parent, rows);
    if (first == null) return false;
    if (SourceRows.converts(first)) return true;
    return tops.containsKey(node)
        && firsts.contains(first)
        && !eventsOnly.contains(first)
        && !windows.contains(node);
  }

  /** Whether a chain that starts at {@code node} logs its rows: a watermark's, our source's. */
  private boolean logsRows(SparkPlan node) {
    if (SourceRows.converts(node)) return true;
    return reads(node)
        && tops.containsKey(ScalaLists.toJava(node.children(), SparkPlan.class).get(0));
  }

  /**
   * Whether {@code node} is probed and the last of a chain: the plan's root (adaptive execution
   * plans each stage apart) or below a parent that does not pass its rows on.
   */
  static boolean top(SparkPlan node, SparkPlan parent, long[] rows) {
    if (!OperatorProbes.probed(node, parent)) return false;
    if (OperatorProbes.chain(node, parent, rows) == ProbeMetrics.NO_CHAIN) return false;
    return parent == null || !(OperatorRows.keepsRows(parent) && streamed(parent) == node);
  }

  /** The first operator of the chain whose top is {@code top}, or null where it has none. */
  static SparkPlan first(SparkPlan top, SparkPlan parent, long[] rows) {
    SparkPlan node = top;
    int chain = OperatorProbes.chain(node, parent, rows);
    while (chain == ProbeMetrics.NEXT) {
      SparkPlan next = streamed(node);
      if (!OperatorProbes.probed(next, node)) return null;
      parent = node;
      node = next;
      chain = OperatorProbes.chain(node, parent, rows);
    }
    return chain == ProbeMetrics.FIRST ? node : null;
  }

  /** Whether {@code stage} (the exchange above it, or the plan's root) holds a node {@code is}. */
  private static boolean holds(SparkPlan stage, Predicate<SparkPlan> is) {
    if (!(stage instanceof Exchange)) return holdsBelow(stage, is);
    for (SparkPlan child : ScalaLists.toJava(stage.children(), SparkPlan.class)) {
      if (holdsBelow(child, is)) return true;
    }
    return false;
  }

  /** Whether {@code node}'s subtree, down to the exchanges, holds a node {@code is}. */
  static boolean holdsBelow(SparkPlan node, Predicate<SparkPlan> is) {
    if (is.test(node)) return true;
    if (node instanceof Exchange) return false;
    for (SparkPlan child : ScalaLists.toJava(node.children(), SparkPlan.class)) {
      if (holdsBelow(child, is)) return true;
    }
    return false;
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

  /**
   * The ordinal of the first timestamp column of {@code node}'s output that carries a watermark's
   * delay (a watermark below marks it), else -1.
   */
  private static int markedEventTime(SparkPlan node) {
    List<Attribute> output = ScalaLists.toJava(node.output(), Attribute.class);
    for (int i = 0; i < output.size(); i++) {
      Attribute column = output.get(i);
      if (column.dataType() instanceof TimestampType && column.metadata().contains(DELAY_KEY))
        return i;
    }
    return -1;
  }

  /**
   * The ordinal of the first window column of {@code node}'s output that carries a watermark's
   * delay (a struct whose second field, the window's end, is a timestamp), else -1.
   */
  private static int markedWindow(SparkPlan node) {
    List<Attribute> output = ScalaLists.toJava(node.output(), Attribute.class);
    for (int i = 0; i < output.size(); i++) {
      Attribute column = output.get(i);
      if (column.dataType() instanceof StructType window
          && window.fields().length == 2
          && window.fields()[1].dataType() instanceof TimestampType
          && column.metadata().contains(DELAY_KEY)) return i;
    }
    return -1;
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
