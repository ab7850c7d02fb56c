package io.cloudprofiler.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import scala.Function1;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.runtime.BoxedUnit;

/**
 * Enable with {@code --conf spark.sql.extensions=io.cloudprofiler.spark.CloudProfilerExtensions}: adds the SQL
 * function {@code cp_trace('channel', id)}, see {@link TraceExpression}.
 */
public class CloudProfilerExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    Function1<Seq<Expression>, Expression> builder = TraceExpression::build;
    extensions.injectFunction(new Tuple3<>(new FunctionIdentifier(TraceExpression.NAME),
        new ExpressionInfo(TraceExpression.class.getName(), TraceExpression.NAME), builder));
    return BoxedUnit.UNIT;
  }
}
