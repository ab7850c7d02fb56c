package io.cloudprofiler.spark.sql;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.Block;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.EmptyBlock$;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.CodegenSupport;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.execution.metric.SQLMetric;

/**
 * Placed by {@link OperatorProbes} above each operator of a whole-stage-codegen pipeline, inside
 * the pipeline: the operator's rows pass through it unchanged, in the same generated code, and it
 * counts them and times the gaps between them ({@link ProbeCounters}), so that each operator's time
 * with its children (inclusive) is measured where it runs and the analysis derives the operator's
 * own time (exclusive) by subtracting its children's. The probe directly under the pipeline's
 * {@link WholeStageCodegenExec} also brackets each {@code processNext} call ({@link
 * PipelineClock}), so that the time the pipeline is returned to its consumer counts in no gap.
 *
 * <p>Per row the generated code costs a decrement and two comparisons ({@link
 * ProbeCounters#arrives}, {@link ProbeCounters#left}); a row whose gap is timed (the first 64, then
 * one in 64, past 16,384 rows one in 256, and a long gap, found at the timed rows of the probe
 * below) costs two TSC reads. The parent's code is wrapped in {@code do { ... } while (false)} as
 * Spark's own filter wraps it, so that a parent that drops the row with {@code continue} still
 * leaves through the probe. Outside whole-stage codegen (code generation off or failed) the probe
 * passes its child's rows on and measures nothing.
 *
 * <p>In a chain of operators that keep a row's identity ({@link OperatorRows}) the probe also logs
 * the sampled rows' ids: the chain's first probe numbers its rows and decides the sample, the
 * probes above read both, in the same iteration of the pipeline's loop.
 *
 * <p>The generated code names no probe id (the id comes with the metrics object, a reference), so
 * that each run of a query compiles to the same code as the last: Spark's cache of compiled
 * pipelines then serves it, already compiled by the JIT. An id in the code made every run compile
 * its pipelines anew and run them interpreted at first (TPC-H at scale 1: +10% to +60% per query).
 *
 * <p>Canonically the probe is its child, so that instrumented plans reuse exchanges and subqueries
 * as uninstrumented ones do.
 */
public final class OperatorProbe extends UnaryCodegenPlan {
  private static final long serialVersionUID = 1L;
  static final String NAME = "CloudprofilerProbe";

  /** The pipeline's clock while its code is generated (generation runs on one thread). */
  private static final ThreadLocal<String> CLOCK = new ThreadLocal<>();

  /**
   * While a probe's parents' code is generated: the counters of the first probe of the chain whose
   * rows they get ({@link OperatorRows}), else null.
   */
  private static final ThreadLocal<String> CHAIN = new ThreadLocal<>();

  /**
   * While a probe's parents' code is generated: its counters, which watch the probe above for long
   * gaps ({@link ProbeCounters}).
   */
  private static final ThreadLocal<String> BELOW = new ThreadLocal<>();

  /**
   * The counters made so far in the pipeline being generated, by probe: one per probe in a
   * pipeline. Spark may generate an operator's parents' code twice and keep one copy (a sort
   * aggregate's consume code, Spark 4), and the fields of the copy it drops stay: a second counter
   * of the probe, whose code never runs, published the pipeline's whole span as the probe's time on
   * top of the live one's (TPC-H q13: a merge join's time 1.7 times its task's run time). Where
   * both copies run, one counter times the probe's rows as one stream, as it should. Set with
   * {@link #CLOCK}.
   */
  private static final ThreadLocal<Map<Long, String>> COUNTERS = new ThreadLocal<>();

  private final SparkPlan child;
  private final long id;
  private final String operator;
  private final ProbeMetrics metrics;

  OperatorProbe(SparkPlan child, long id, String operator, ProbeMetrics metrics) {
    this.child = Objects.requireNonNull(child, "child");
    this.id = id;
    this.operator = operator;
    this.metrics = metrics;
  }

  long probeId() {
    return id;
  }

  @Override
  public SparkPlan child() {
    return child;
  }

  @Override
  SparkPlan withNewChild(SparkPlan newChild) {
    return new OperatorProbe(newChild, id, operator, metrics);
  }

  @Override
  public String nodeName() {
    return NAME;
  }

  @Override
  public String simpleString(int maxFields) {
    return NAME + " " + id + " (" + operator + ")";
  }

  @Override
  public String verboseString(int maxFields) {
    return simpleString(maxFields);
  }

  @Override
  @SuppressWarnings("unchecked") // Map.updated's value type is a supertype parameter in Scala
  public scala.collection.immutable.Map<String, SQLMetric> metrics() {
    scala.collection.immutable.Map<String, SQLMetric> byName =
        scala.collection.immutable.Map$.MODULE$.empty();
    for (var metric : metrics.byName().entrySet())
      byName = byName.updated(metric.getKey(), metric.getValue());
    return byName;
  }

  @Override
  public Partitioning outputPartitioning() {
    return child.outputPartitioning();
  }

  @Override
  public SparkPlan doCanonicalize() {
    return child.canonicalized();
  }

  @Override
  public RDD<InternalRow> doExecute() {
    return child.execute();
  }

  /**
   * Above a {@code ColumnarToRow}, its batches are timed as they come ({@link BatchTimes}): the
   * rows' gaps then hold no batch's decoding.
   */
  @Override
  List<RDD<InternalRow>> inputs(List<RDD<InternalRow>> child) {
    return this.child instanceof ColumnarToRowExec ? BatchTimes.timed(child, id) : child;
  }

  @Override
  public boolean supportCodegen() {
    return true; // a child outside code generation comes in through an InputAdapter
  }

  @Override
  public String doProduce(CodegenContext ctx) {
    if (!(parent() instanceof WholeStageCodegenExec)) {
      return ((CodegenSupport) child).produce(ctx, this);
    }
    String clock =
        ctx.addMutableState(
            PipelineClock.class.getName(),
            "cpClock",
            v -> v + " = new " + PipelineClock.class.getName() + "();",
            true,
            true);
    String outer = CLOCK.get();
    Map<Long, String> outerCounters = COUNTERS.get();
    CLOCK.set(clock);
    COUNTERS.set(new HashMap<>());
    String pipeline;
    try {
      pipeline = ((CodegenSupport) child).produce(ctx, this);
    } finally {
      CLOCK.set(outer);
      COUNTERS.set(outerCounters);
    }
    return clock + ".enter();\ntry {\n" + pipeline + "\n} finally {\n" + clock + ".leave();\n}\n";
  }

  @Override
  String consumeCode(CodegenContext ctx, List<ExprCode> input, ExprCode row) {
    // the row as the child gave it, when it is one already; else the parent builds it, as before
    String rowTerm =
        row != null && row.code().toString().trim().isEmpty() ? row.value().toString() : null;
    String clock = CLOCK.get();
    if (clock == null) return passOn(ctx, input, rowTerm); // not under a pipeline's top probe
    // a probe that passes on the rows of the probe below continues its chain; one whose child was
    // not in a chain (or is not below it in this code) starts one
    String below = metrics.chain == ProbeMetrics.NEXT ? CHAIN.get() : null;
    boolean first = metrics.chain != ProbeMetrics.NO_CHAIN && below == null;
    // the probe whose consume code this is watches this one's gaps at its timed rows
    String watched = BELOW.get();
    String counters =
        COUNTERS
            .get()
            .computeIfAbsent(
                id,
                probe ->
                    ctx.addMutableState(
                        ProbeCounters.class.getName(),
                        "cpProbe",
                        v ->
                            v
                                + " = new "
                                + ProbeCounters.class.getName()
                                + "("
                                + clock
                                + ", "
                                + ctx.addReferenceObj(
                                    "cpMetrics", metrics, ProbeMetrics.class.getName())
                                + ", "
                                + below
                                + ", "
                                + watched
                                + ");",
                        true,
                        true));
    String chain = first ? counters : below;
    // the top of a sourced chain below a shuffle also logs each sampled row's partition
    String[] partition =
        chain != null && metrics.partition != null
            ? partitionCode(ctx, metrics.partition, input)
            : null;
    String logRow =
        partition == null
            ? counters + ".logRow(" + chain + ".rowId);\n"
            : "{\n"
                + partition[1]
                + "\n"
                + counters
                + ".logRow("
                + chain
                + ".rowId, "
                + partition[2]
                + ");\n}\n";
    String rowCode =
        chain == null
            ? ""
            : (partition == null ? "" : partition[0])
                + (first
                    ? counters
                        + ".rowSampled = "
                        + OperatorRows.keptCode(
                            "++" + counters + ".rowId", metrics.rowsX, metrics.rowsY)
                        + ";\nif ("
                        + counters
                        + ".rowSampled) "
                        + logRow
                    : "if ("
                        + below
                        + ".rowSampled) "
                        + logRow
                        // below a Python UDF: its own rows too, numbered as above the UDF
                        + (metrics.udfEnd
                            ? "if ("
                                + OperatorRows.keptCode(
                                    "++" + counters + ".udfRowId", metrics.rowsX, metrics.rowsY)
                                + ") "
                                + counters
                                + ".logRow("
                                + counters
                                + ".udfRowId);\n"
                            : ""));
    if (chain != null && metrics.eventTime >= 0 && metrics.eventTime < input.size())
      rowCode += eventTimeCode(input.get(metrics.eventTime), chain, metrics.windowEnd);
    String outer = CHAIN.get(), outerBelow = BELOW.get();
    CHAIN.set(chain);
    BELOW.set(counters);
    String parents;
    try {
      parents = passOn(ctx, input, rowTerm);
    } finally {
      CHAIN.set(outer);
      BELOW.set(outerBelow);
    }
    return counters
        + ".arrives();\n"
        + rowCode
        + "do {\n"
        + parents
        + "\n} while (false);\n"
        + counters
        + ".left();\n";
  }

  /**
   * At the top of a sourced chain below a shuffle ({@link ShuffledRows}): {the code that evaluates
   * the columns the partition reads, the code that computes it, its value}. The columns are
   * evaluated for every row, as Spark's own operators evaluate a deferred column before they use it
   * (once, its code then cleared: the parent reads the same value); the partition only for a
   * sampled row. Null where the expression reads a column this code does not have, or its code
   * cannot be generated (which turns the partitions off, one line saying why).
   */
  private static String[] partitionCode(
      CodegenContext ctx, Expression partition, List<ExprCode> input) {
    List<Integer> ordinals = new ArrayList<>();
    ShuffledRows.ordinals(partition, ordinals);
    TreeSet<Integer> read = new TreeSet<>(ordinals);
    if (read.isEmpty() || read.last() >= input.size()) return null;
    Map<Integer, Block> codes = new HashMap<>();
    StringBuilder evaluate = new StringBuilder();
    for (int ordinal : read) {
      ExprCode column = input.get(ordinal);
      codes.put(ordinal, column.code());
      evaluate.append(column.code().toString()).append('\n');
      column.code_$eq(EmptyBlock$.MODULE$);
    }
    var outerVars = ctx.currentVars();
    String outerRow = ctx.INPUT_ROW();
    ctx.currentVars_$eq(ScalaLists.of(input.toArray(new ExprCode[0])));
    ctx.INPUT_ROW_$eq(null);
    try {
      ExprCode value = partition.genCode(ctx);
      return new String[] {evaluate.toString(), value.code().toString(), value.value().toString()};
    } catch (Throwable e) {
      // the columns as they were (the parent evaluates them): the query runs on without partitions
      codes.forEach((ordinal, code) -> input.get(ordinal).code_$eq(code));
      ShuffledRows.failed(e);
      return null;
    } finally {
      ctx.currentVars_$eq(outerVars);
      ctx.INPUT_ROW_$eq(outerRow);
    }
  }

  /**
   * At the top of a chain below a watermark ({@link EventTimes}): the code that logs a sampled
   * row's event time, or where {@code window}, a windowed aggregation's result's window end (the
   * struct's second field). The column's value is computed here, as Spark's own operators evaluate
   * a deferred column before they use it (once, its code then cleared): the parent that builds the
   * row out of the pipeline reads the same value.
   */
  private static String eventTimeCode(ExprCode column, String chain, boolean window) {
    String evaluate = column.code().toString();
    column.code_$eq(EmptyBlock$.MODULE$);
    return evaluate
        + "\nif ("
        + chain
        + ".rowSampled && !("
        + column.isNull()
        + ")"
        + (window ? " && !" + column.value() + ".isNullAt(1)" : "")
        + ") "
        + SourceRows.class.getName()
        + (window ? ".logWindowEnd(" : ".logEventTime(")
        + chain
        + ".rowId, "
        + column.value()
        + (window ? ".getLong(1)" : "")
        + ");\n";
  }

  @Override
  public int productArity() {
    return 4;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) return child;
    if (n == 1) return id;
    if (n == 2) return operator;
    if (n == 3) return metrics;
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof OperatorProbe;
  }
}
