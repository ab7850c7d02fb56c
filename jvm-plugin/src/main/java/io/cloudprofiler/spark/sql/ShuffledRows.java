package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Guard;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.CreateArray;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.ExpandExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec;
import org.apache.spark.sql.execution.exchange.Exchange;
import org.apache.spark.sql.types.DataTypes;

/**
 * The shuffle partition each sampled source row goes to, where a streaming query saves an
 * aggregation's state in its last stage, past one shuffle: so that the analysis times each record
 * to the end of the task that saved its key's state (and, in the update and complete modes, wrote
 * its key's result), not only to the end of its batch's last task.
 *
 * <p>A record's values go on past the chain's top in new rows (the partial aggregation's, the
 * shuffle's), whose task is the one of the partition that the shuffle's hash of the record's key
 * picks. The top of the chain the source's rows start computes that partition for a sampled row,
 * from its own output, with the shuffle's own expression (Spark's Murmur3 of the grouping keys,
 * modulo the partitions), its columns traced down through the partial aggregation's grouping, the
 * projections and the watermark between them. A stateful aggregation fixes its partitions (its
 * state is kept per partition), so the partition is the number of the task that reads it.
 *
 * <p>The top logs the row's id and the partition at one TSC, the id into its row channel and the
 * partition into {@link #CHANNEL} (one per JVM) as {@link #packed}: the analysis ties the two by
 * process, TSC and ordinal. A filter between them (a tumbling window's, on its time column) is
 * evaluated there too: a row it drops logs no partition. An expansion between them (a sliding
 * window's, a row for each window that holds the row's time) makes one partition for each row it
 * makes, each logged once: the analysis times the record to the last of their tasks' ends. A row
 * the stateful operator drops as late (behind the watermark) is still timed to its partition's
 * task.
 */
public final class ShuffledRows {
  /**
   * The channel's name, metadata event; declared here only: the build writes them into the jar
   * ({@link io.cloudprofiler.spark.Tables}), where the analysis reads them.
   */
  public static final String CHANNEL = "spark.shuffle.partitions";

  public static final String EVENT = "shuffled_rows";

  /**
   * The metadata key of the channel's files that states {@link #PARTITION_BITS}, so that the files
   * say how to read their ids.
   */
  public static final String PARTITION_BITS_KEY = "shuffle.partition_bits";

  /**
   * A record's id: the sign bit set (a row's id never has it: the live tab, which pairs every
   * channel's ids, pairs none of these with a row's), the row id's low 32 bits (its ordinal, with
   * the Python UDF flag) above the partition's PARTITION_BITS bits.
   */
  static final int PARTITION_BITS = 31;

  private static final Guard GUARD = new Guard("the shuffle partitions of sampled rows");

  /**
   * The partition of a row a filter on the way drops (as Spark's Filter drops a row whose condition
   * is false or null): none, so nothing is logged for it.
   */
  static final int NONE = -1;

  private static final Expression DROPPED = Literal.create(NONE, DataTypes.IntegerType);

  /**
   * The most rows an expansion may make of one for their partitions to be logged (a sliding window
   * of 8 slides): each is a copy of the partition's expression in the top's generated code, which
   * must stay within the JVM's limit on a method's size; past it a record is timed to the sink.
   */
  static final int MAX_MADE = 8;

  /** This JVM's channel, 0 until opened (once). */
  private static final AtomicLong OPEN = new AtomicLong();

  static {
    ChannelCaches.register(ShuffledRows::forget);
  }

  /**
   * The chains' tops that log their sampled rows' partitions: the partitions' expression, an array
   * of one for each row a row makes below the shuffle.
   */
  final Map<SparkPlan, Expression> partitions = new IdentityHashMap<>();

  private ShuffledRows() {}

  /**
   * The tops of {@code plan}'s sourced chains ({@link EventTimes#sourcedTop}) whose rows a shuffle
   * below its last stage partitions by key, where that stage saves an aggregation's state.
   */
  static ShuffledRows of(SparkPlan plan, long[] rows, EventTimes events) {
    ShuffledRows found = new ShuffledRows();
    if (rows[0] == 0 || GUARD.disabled()) return found;
    try {
      if (EventTimes.holdsBelow(plan, EventTimes::savesState)) {
        List<Exchange> exchanges = new ArrayList<>();
        boundary(plan, exchanges);
        for (Exchange exchange : exchanges) {
          if (exchange.outputPartitioning() instanceof HashPartitioning hash)
            found.trace(hash.partitionIdExpression(), exchange, rows, events);
        }
      }
      return found;
    } catch (Throwable e) { // the operators are still timed, their rows timed as before
      GUARD.disable("finding the shuffle partitions of a plan's rows", e);
      return new ShuffledRows();
    }
  }

  /** The partition's code could not be generated: no query logs partitions from now on. */
  static void failed(Throwable e) {
    GUARD.disable("generating the code of a row's shuffle partition", e);
  }

  /** The exchanges below {@code node}'s stage. */
  private static void boundary(SparkPlan node, List<Exchange> found) {
    if (node instanceof Exchange exchange) {
      found.add(exchange);
      return;
    }
    for (SparkPlan child : ScalaLists.toJava(node.children(), SparkPlan.class))
      boundary(child, found);
  }

  /**
   * Follows the partition's expression down from the exchange through the operators that keep a row
   * whole (a partial aggregation's grouping, a projection, a watermark), drop it (a filter, whose
   * condition then decides whether the row has a partition: {@link #NONE} where it drops the row)
   * or make several rows of it (an expansion, a sliding window's: one expression a row it makes) to
   * a sourced chain's top, where they are bound to that top's output as one array; gives up at any
   * other operator, or past {@link #MAX_MADE} rows made of one.
   */
  private void trace(Expression partition, SparkPlan parent, long[] rows, EventTimes events) {
    SparkPlan node = ScalaLists.toJava(parent.children(), SparkPlan.class).get(0);
    boolean aggregated = false;
    List<Expression> made = List.of(partition);
    while (true) {
      if (aggregated && events.sourcedTop(node, parent, rows)) {
        Expression[] bound = new Expression[made.size()];
        for (int i = 0; i < bound.length; i++) {
          bound[i] = made.get(i).deterministic() ? bind(made.get(i), node) : null;
          if (bound[i] == null) return;
        }
        partitions.put(node, new CreateArray(ScalaLists.of(bound), false));
        return;
      }
      List<Map<ExprId, Expression>> defined = new ArrayList<>();
      if (node instanceof BaseAggregateExec aggregate && !aggregated) {
        defined.add(defined(aggregate.groupingExpressions()));
        aggregated = true;
      } else if (node instanceof ProjectExec project) {
        defined.add(defined(project.projectList()));
      } else if (aggregated && node instanceof FilterExec filter) {
        made = made.stream().map(e -> (Expression) new If(filter.condition(), e, DROPPED)).toList();
      } else if (aggregated && node instanceof ExpandExec expand) {
        List<Attribute> output = ScalaLists.toJava(expand.output(), Attribute.class);
        for (var projection : ScalaLists.toJava(expand.projections(), scala.collection.Seq.class)) {
          List<Expression> values = ScalaLists.toJava(projection, Expression.class);
          Map<ExprId, Expression> map = new HashMap<>();
          for (int i = 0; i < output.size(); i++) map.put(output.get(i).exprId(), values.get(i));
          defined.add(map);
        }
      } else if (!EventTimes.reads(node)) {
        return;
      }
      if (!defined.isEmpty()) {
        List<Expression> substituted = new ArrayList<>();
        for (Map<ExprId, Expression> map : defined)
          for (Expression e : made) substituted.add(substitute(e, map));
        if (substituted.size() > MAX_MADE) return;
        made = substituted;
      }
      parent = node;
      node = ScalaLists.toJava(node.children(), SparkPlan.class).get(0);
    }
  }

  /** What each attribute that {@code outputs} define stands for: an alias's child, or itself. */
  private static Map<ExprId, Expression> defined(scala.collection.Seq<?> outputs) {
    Map<ExprId, Expression> map = new HashMap<>();
    for (NamedExpression e : ScalaLists.toJava(outputs, NamedExpression.class))
      map.put(e.exprId(), e instanceof Alias alias ? alias.child() : (Expression) e);
    return map;
  }

  /** {@code e} with each attribute that {@code map} defines replaced by what it stands for. */
  private static Expression substitute(Expression e, Map<ExprId, Expression> map) {
    return rewrite(e, a -> map.getOrDefault(a.exprId(), a));
  }

  /**
   * {@code e} with each attribute replaced by a reference to its ordinal in {@code node}'s output,
   * or null where one is not there.
   */
  private static Expression bind(Expression e, SparkPlan node) {
    List<Attribute> output = ScalaLists.toJava(node.output(), Attribute.class);
    return rewrite(
        e,
        a -> {
          for (int i = 0; i < output.size(); i++) {
            if (output.get(i).exprId().equals(a.exprId()))
              return new BoundReference(i, a.dataType(), a.nullable());
          }
          return null;
        });
  }

  /** {@code e} with each attribute {@code a} replaced by {@code at(a)}; null where that is. */
  private static Expression rewrite(Expression e, Function<Attribute, Expression> at) {
    if (e instanceof Attribute a) return at.apply(a);
    List<Expression> children = ScalaLists.toJava(e.children(), Expression.class);
    if (children.isEmpty()) return e;
    Expression[] rewritten = new Expression[children.size()];
    for (int i = 0; i < rewritten.length; i++) {
      rewritten[i] = rewrite(children.get(i), at);
      if (rewritten[i] == null) return null;
    }
    return e.withNewChildren(ScalaLists.of(rewritten));
  }

  /** The ordinals of {@code node}'s output that {@code bound} (of {@link #bind}) reads. */
  static void ordinals(Expression bound, List<Integer> found) {
    if (bound instanceof BoundReference reference) found.add(reference.ordinal());
    for (Expression child : ScalaLists.toJava(bound.children(), Expression.class))
      ordinals(child, found);
  }

  /**
   * Logs a sampled row's partitions at {@code tsc}, the TSC its row record was logged at: each of
   * {@code partitions} once, none for {@link #NONE}.
   */
  static void log(long rowId, ArrayData partitions, long tsc) {
    if (GUARD.disabled()) return;
    try {
      long channel = OPEN.get();
      if (channel == 0) channel = open();
      for (int i = 0; channel != 0 && i < partitions.numElements(); i++) {
        int partition = partitions.getInt(i);
        if (partition != NONE && !before(partitions, i, partition))
          CloudProfiler.logAt(channel, packed(rowId, partition), tsc);
      }
    } catch (Throwable e) {
      GUARD.disable("logging a row's shuffle partition", e);
    }
  }

  /** Whether {@code partitions} holds {@code partition} before index {@code end}. */
  private static boolean before(ArrayData partitions, int end, int partition) {
    for (int i = 0; i < end; i++) if (partitions.getInt(i) == partition) return true;
    return false;
  }

  /** The id of row {@code rowId}'s record of its partition (0 to 2^31 - 1, as Spark's are). */
  static long packed(long rowId, int partition) {
    return Long.MIN_VALUE | (rowId & 0xFFFFFFFFL) << PARTITION_BITS | partition;
  }

  /** Opens this JVM's channel once (every record one sampled row: its handler passes all on). */
  private static synchronized long open() {
    if (OPEN.get() == 0)
      OPEN.set(
          CloudProfiler.openChannel(
              CHANNEL,
              "identity",
              new long[0],
              new String[] {"spark.event", PARTITION_BITS_KEY},
              new String[] {EVENT, String.valueOf(PARTITION_BITS)}));
    return OPEN.get();
  }

  /** Forgets the channel as the library stops (the next application opens its own). */
  static void forget() {
    OPEN.set(0);
  }
}
