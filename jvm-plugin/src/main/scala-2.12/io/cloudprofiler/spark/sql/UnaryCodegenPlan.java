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
 * The part of {@link CodegenPassThrough} whose signatures name Scala collections, which differ
 * between Scala 2.12 (Spark 3.5) and 2.13 (Spark 4): this is the Scala 2.12 file (Spark 3.5;
 * jvm-plugin/src/main/scala-2.13 holds the other).
 */
abstract class UnaryCodegenPlan extends CodegenPassThrough {
  private static final long serialVersionUID = 1L;

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
  @SuppressWarnings("unchecked") // RDD<InternalRow> is what the Seq holds; Java sees raw RDDs
  public Seq<RDD<InternalRow>> inputRDDs() {
    Seq<RDD<InternalRow>> child = ((CodegenSupport) child()).inputRDDs();
    List<RDD<InternalRow>> own =
        ScalaLists.toJava(child, RDD.class).stream().map(rdd -> (RDD<InternalRow>) rdd).toList();
    List<RDD<InternalRow>> handed = inputs(own);
    return handed == own ? child : ScalaLists.of(handed.toArray(new RDD[0]));
  }

  @Override
  public String doConsume(CodegenContext ctx, Seq<ExprCode> input, ExprCode row) {
    return consumeCode(ctx, ScalaLists.toJava(input, ExprCode.class), row);
  }
}
