package io.cloudprofiler.spark.sql;

import java.util.List;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.execution.CodegenSupport;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * A physical plan node with one child, inside whole-stage code generation, that passes its child's
 * rows and output through unchanged; what of it names Scala collections is in {@link
 * UnaryCodegenPlan}, one file per Scala version.
 */
abstract class CodegenPassThrough extends SparkPlan implements CodegenSupport {
  private static final long serialVersionUID = 1L;

  /** CodegenSupport's own state: the node that consumes this one's rows in generated code. */
  private CodegenSupport parent;

  public abstract SparkPlan child();

  /** This node with {@code child} in place of its own. */
  abstract SparkPlan withNewChild(SparkPlan child);

  /** The input RDDs of the pipeline as this node hands them on: its child's, by default. */
  List<RDD<InternalRow>> inputs(List<RDD<InternalRow>> child) {
    return child;
  }

  /** The code run per row of the child, {@code input} its columns. */
  abstract String consumeCode(CodegenContext ctx, List<ExprCode> input, ExprCode row);

  /** The code that hands the row on to the parent, as the child handed it to this node. */
  final String passOn(CodegenContext ctx, List<ExprCode> input, String row) {
    return consume(ctx, ScalaLists.of(input.toArray(new ExprCode[0])), row);
  }

  @Override
  public CodegenSupport parent() {
    return parent;
  }

  @Override
  public void parent_$eq(CodegenSupport parent) {
    this.parent = parent;
  }
}
