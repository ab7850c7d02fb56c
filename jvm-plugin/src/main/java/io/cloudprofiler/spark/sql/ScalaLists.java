package io.cloudprofiler.spark.sql;

import java.util.ArrayList;
import scala.collection.Iterator;
import scala.collection.Seq;
import scala.collection.immutable.List;
import scala.collection.immutable.List$;

/**
 * Scala lists to and from Java, through what Scala 2.12 and 2.13 both have: {@code
 * scala.collection.Seq} is the supertype of every Seq in both, and an immutable list is a Seq in
 * both, whichever package an API names it from.
 */
public final class ScalaLists {
  private ScalaLists() {}

  @SafeVarargs
  public static <T> List<T> of(T... items) {
    List<T> list = List$.MODULE$.empty();
    for (int i = items.length - 1; i >= 0; i--) list = list.$colon$colon(items[i]);
    return list;
  }

  /** The items of a Scala Seq, each checked to be a {@code type}. */
  public static <T> java.util.List<T> toJava(Seq<?> seq, Class<T> type) {
    java.util.List<T> list = new ArrayList<>();
    for (Iterator<?> it = seq.iterator(); it.hasNext(); ) list.add(type.cast(it.next()));
    return list;
  }
}
