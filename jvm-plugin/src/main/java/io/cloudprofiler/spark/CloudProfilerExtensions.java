package io.cloudprofiler.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import scala.Function1;
import scala.Tuple3;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * Enable with {@code --conf spark.sql.extensions=io.cloudprofiler.spark.CloudProfilerExtensions}:
 * adds the SQL function {@code cp_trace('channel', id)}, see {@link TraceExpression}. Guarded: a
 * failure here leaves the session without the function, saying why in one log line, instead of
 * failing the session.
 */
public class CloudProfilerExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
  private static final Guard GUARD = new Guard("the SQL extension (" + TraceExpression.NAME + ")");

  @Override
  @SuppressWarnings({
    "unchecked",
    "rawtypes"
  }) // Spark's builder type names the Seq of its Scala version
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    try {
      extensions.injectFunction(
          (Tuple3)
              new Tuple3<>(
                  new FunctionIdentifier(TraceExpression.NAME),
                  new ExpressionInfo(TraceExpression.class.getName(), TraceExpression.NAME),
                  new Builder()));
    } catch (Throwable e) {
      GUARD.disable("injectFunction", e);
    }
    return BoxedUnit.UNIT;
  }

  /**
   * Takes its argument untyped, so that no cast to this jar's Seq type precedes the guard in {@link
   * TraceExpression#build}.
   */
  private static final class Builder extends AbstractFunction1<Object, Expression> {
    @Override
    public Expression apply(Object arguments) {
      return TraceExpression.build(arguments);
    }
  }
}
