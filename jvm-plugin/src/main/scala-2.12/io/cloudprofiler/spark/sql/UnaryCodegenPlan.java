package io.cloudprofiler.spark.sql;

import java.util.List;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.execution.CodegenSupport;
import org.apache.spark.sql.execution.SparkPlan;
import scala.collection.IndexedSeq;
import scala.collection.Seq;

/**
 * The part of a physical plan node with one child, inside whole-stage code generation, whose
 * signatures name Scala collections, which differ between Scala 2.12 (Spark 3.5) and 2.13 (Spark
 * 4): this is the Scala 2.12 file (Spark 3.5; jvm-plugin/src/main/scala-2.13 holds the other). The
 * node passes its child's rows and output through unchanged.
 */
abstract class UnaryCodegenPlan extends SparkPlan implements CodegenSupport {
  private static final long serialVersionUID = 1L;

  /** CodegenSupport's own state: the node that consumes this one's rows in generated code. */
  private CodegenSupport parent;

  public abstract SparkPlan child();

  /** This node with {@code child} in place of its own. */
  abstract SparkPlan withNewChild(SparkPlan child);

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

  @Override
  public Seq<SparkPlan> children() {
    return ScalaLists.of(child());
  }

  @Override
  public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> newChildren) {
    return withNewChild(newChildren.apply(0));
  }

  @Override
  public Seq<Attribute> output() {
    return child().output();
  }

  @Override
  public Seq<SortOrder> outputOrdering() {
    return child().outputOrdering();
  }

  @Override
  public Seq<RDD<InternalRow>> inputRDDs() {
    return ((CodegenSupport) child()).inputRDDs();
  }

  @Override
  public String doConsume(CodegenContext ctx, Seq<ExprCode> input, ExprCode row) {
    return consumeCode(ctx, ScalaLists.toJava(input, ExprCode.class), row);
  }
}
