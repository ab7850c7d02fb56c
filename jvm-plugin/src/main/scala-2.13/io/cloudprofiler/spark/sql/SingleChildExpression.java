package io.cloudprofiler.spark.sql;

import org.apache.spark.sql.catalyst.expressions.Expression;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;

/**
 * The part of Catalyst's {@link Expression} whose signatures name Scala collections, which differ
 * between Scala 2.12 (Spark 3.5) and 2.13 (Spark 4): this is the Scala 2.13 file (Spark 4;
 * jvm-plugin/src/main/scala-2.12 holds the other), and the only place where the plugin's sources
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
