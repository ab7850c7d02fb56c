package io.cloudprofiler.spark.sql;

import org.apache.spark.sql.catalyst.expressions.Expression;
import scala.collection.IndexedSeq;
import scala.collection.Seq;

/**
 * The part of Catalyst's {@link Expression} whose signatures name Scala collections, which differ
 * between Scala 2.12 (Spark 3.5) and 2.13 (Spark 4): this is the Scala 2.12 file (Spark 3.5;
 * jvm-plugin/src/main/scala-2.13 holds the other), and the only place where the plugin's sources
 * name those types.
 */
abstract class SingleChildExpression extends Expression {
  public abstract Expression child();

  /** This expression with {@code child} in place of its own. */
  abstract Expression withNewChild(Expression child);

  @Override
  public Seq<Expression> children() {
    return ScalaLists.of(child());
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> newChildren) {
    return withNewChild(newChildren.apply(0));
  }
}
