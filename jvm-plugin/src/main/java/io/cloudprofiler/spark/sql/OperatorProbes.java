package io.cloudprofiler.spark.sql;

import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.Guard;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.physical.BroadcastPartitioning;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.CodegenSupport;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.LocalTableScanExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.ObjectType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * With {@code spark.cloudprofiler.operators} true in the session, places an {@link OperatorProbe}
 * above every operator that whole-stage code generation will put in a pipeline: each operator that
 * generates code, and each child such an operator reads through an InputAdapter (a shuffle's read,
 * a Python UDF's evaluation, a sort below a merge join), so that each one's time is measured in the
 * pipeline that runs it. The rule runs where Spark applies columnar rules, after the plan's
 * exchanges are in place and before the pipelines are formed, for every query and for each stage
 * that adaptive execution plans.
 *
 * <p>Left alone: the build side of a broadcast (its consumer needs the broadcast itself), columnar
 * operators, operators of typed Dataset objects (code generation keeps them out of pipelines), a
 * local table scan alone, and plans already instrumented. With whole-stage code generation off
 * nothing is instrumented (the probes measure inside pipelines only), which the log says once.
 */
public final class OperatorProbes extends Rule<SparkPlan> {
  private static final Guard GUARD = new Guard("operator timing (" + Config.OPERATORS.name + ")");
  private static final AtomicLong NEXT_ID = new AtomicLong();
  private static final Logger LOG = LoggerFactory.getLogger(OperatorProbes.class);
  private static final AtomicBoolean WITHOUT_CODEGEN_SAID = new AtomicBoolean();

  private final SparkSession session;

  private OperatorProbes(SparkSession session) {
    this.session = session;
  }

  /** The columnar rule the SQL extension injects: the probes go in after the transitions. */
  public static ColumnarRule columnarRule(SparkSession session) {
    Rule<SparkPlan> probes = new OperatorProbes(session);
    return new ColumnarRule() {
      @Override
      public Rule<SparkPlan> postColumnarTransitions() {
        return probes;
      }
    };
  }

  /** The session's setting, checked: a bad value fails the query naming it. */
  static boolean enabled() {
    String text = SQLConf.get().getConfString(Config.OPERATORS.name, Config.OPERATORS.defaultValue);
    Boolean on = Config.OPERATORS.parse(text.trim());
    if (on == null) {
      throw new IllegalArgumentException(
          Config.OPERATORS.name + " must be true or false, got '" + text + "'");
    }
    return on;
  }

  /** The session's XoY of the rows whose latency from operator to operator is logged, checked. */
  static long[] rowSample() {
    long x = setting(Config.OPERATOR_ROWS_X), y = setting(Config.OPERATOR_ROWS_Y);
    if (x > y) {
      throw new IllegalArgumentException(
          Config.OPERATOR_ROWS_X.name
              + "="
              + x
              + " is invalid: expected at most "
              + Config.OPERATOR_ROWS_Y.name
              + "="
              + y);
    }
    return new long[] {x, y};
  }

  private static long setting(Config.Key<Integer> key) {
    String text = SQLConf.get().getConfString(key.name, key.defaultValue).trim();
    Integer value = key.parse(text);
    if (value == null) throw Config.invalid(key.name, text, "expected " + key.expected);
    return value;
  }

  @Override
  public SparkPlan apply(SparkPlan plan) {
    if (GUARD.disabled() || !enabled()) return plan;
    if (!SQLConf.get().wholeStageEnabled()) {
      // the probes measure inside generated pipelines only: without them they would add nodes and
      // metrics and measure nothing
      if (!WITHOUT_CODEGEN_SAID.getAndSet(true))
        LOG.warn(
            "cloudprofiler: {} is on but spark.sql.codegen.wholeStage is false: queries run"
                + " without operator timing",
            Config.OPERATORS.name);
      return plan;
    }
    long[] rows = rowSample();
    try {
      EventTimes events = EventTimes.of(plan, rows);
      return instrument(
          plan, null, OperatorNodes.NO_PROBE, rows, events, ShuffledRows.of(plan, rows, events));
    } catch (Throwable e) {
      GUARD.disable("instrumenting a plan", e);
      return plan;
    }
  }

  /**
   * {@code rows}: the XoY of the rows logged along chains ({@link #rowSample}); {@code events}: the
   * plan's chains whose rows carry their event time; {@code shuffled}: the chains' tops that log
   * their rows' shuffle partitions.
   */
  private SparkPlan instrument(
      SparkPlan node,
      SparkPlan parent,
      long parentProbe,
      long[] rows,
      EventTimes events,
      ShuffledRows shuffled) {
    if (node instanceof OperatorProbe) return node;
    boolean probed = probed(node, parent);
    long id = probed ? NEXT_ID.incrementAndGet() : parentProbe;
    List<SparkPlan> children = ScalaLists.toJava(node.children(), SparkPlan.class);
    List<SparkPlan> instrumented = new ArrayList<>();
    boolean changed = false;
    for (SparkPlan child : children) {
      SparkPlan c = instrument(child, node, id, rows, events, shuffled);
      changed |= c != child;
      instrumented.add(c);
    }
    SparkPlan rebuilt =
        changed
            ? node.withNewChildren(ScalaLists.of(instrumented.toArray(new SparkPlan[0])))
            : node;
    if (!probed) return rebuilt;
    // above a Python UDF's evaluation the n-th row out is the n-th row in: the ids of the probe
    // below
    long rowsOf =
        OperatorRows.keepsCount(node) && instrumented.get(0) instanceof OperatorProbe below
            ? below.probeId()
            : id;
    // a windowed aggregation's results may be a chain of one, their operator's ({@link EventTimes})
    int chain = events.firsts.contains(node) ? ProbeMetrics.FIRST : chain(node, parent, rows);
    ProbeMetrics metrics =
        new ProbeMetrics(
            session.sparkContext(),
            id,
            parentProbe,
            chain,
            rowsOf,
            OperatorRows.keepsCount(node) || (parent != null && OperatorRows.keepsCount(parent)),
            chain == ProbeMetrics.FIRST
                && (SourceRows.converts(node) || events.firsts.contains(node)),
            chain == ProbeMetrics.FIRST && events.eventsOnly.contains(node),
            events.tops.getOrDefault(node, ProbeMetrics.NO_EVENT_TIME),
            events.windows.contains(node),
            shuffled.partitions.get(node),
            rows[0],
            rows[1]);
    OperatorNodes.register(id, parentProbe, node, metrics);
    return new OperatorProbe(rebuilt, id, node.nodeName(), metrics);
  }

  /**
   * The place of {@code node}'s probe in a chain of operators that keep a row's identity ({@link
   * OperatorRows}): next in its child's chain where it passes on its child's rows, else first of a
   * chain where its parent, in the same pipeline, passes on its rows, else none. Above a Python
   * UDF's evaluation first; below it, next where its operator passes on its child's rows (it also
   * numbers its own for the UDF, {@link OperatorRows#UDF_ROWS}), else first.
   */
  static int chain(SparkPlan node, SparkPlan parent, long[] rows) {
    if (rows[0] == 0) return ProbeMetrics.NO_CHAIN;
    // both ends of a Python UDF's evaluation number their own rows, which are the same rows
    if (OperatorRows.keepsCount(node)) return ProbeMetrics.FIRST;
    // a source that logs its rows numbers them as this probe does: its chain starts at the source
    if (SourceRows.converts(node)) return ProbeMetrics.FIRST;
    if (OperatorRows.keepsRows(node)) return ProbeMetrics.NEXT;
    if (parent != null && OperatorRows.keepsCount(parent)) return ProbeMetrics.FIRST;
    // a watermark reads the event time of its child's rows: they start a chain ({@link EventTimes})
    if (parent != null && EventTimes.reads(parent)) return ProbeMetrics.FIRST;
    boolean fed =
        parent != null
            && generates(parent)
            && !objects(parent)
            && OperatorRows.passesRowsOf(parent, node);
    return fed ? ProbeMetrics.FIRST : ProbeMetrics.NO_CHAIN;
  }

  /** Whether {@code node} gets a probe: whether code generation will put it in a pipeline. */
  static boolean probed(SparkPlan node, SparkPlan parent) {
    if (node.supportsColumnar() || objects(node)) return false;
    boolean inParent = parent != null && generates(parent) && !objects(parent);
    if (generates(node)) return inParent || !(node instanceof LocalTableScanExec);
    return inParent && !(node.outputPartitioning() instanceof BroadcastPartitioning);
  }

  private static boolean generates(SparkPlan node) {
    return node instanceof CodegenSupport c && c.supportCodegen() && !node.supportsColumnar();
  }

  /** Code generation leaves out an operator whose one column is a JVM object (typed Datasets). */
  private static boolean objects(SparkPlan node) {
    List<?> output = ScalaLists.toJava(node.output(), Object.class);
    return output.size() == 1
        && ((org.apache.spark.sql.catalyst.expressions.Attribute) output.get(0)).dataType()
            instanceof ObjectType;
  }
}
