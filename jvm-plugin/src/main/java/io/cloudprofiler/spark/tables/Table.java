package io.cloudprofiler.spark.tables;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The declaration of one table the plugin writes, beside its writer: its file's name, the folder it
 * lies in, what a row is, and its columns with their types (Integer: int32, Long: int64, Double:
 * float64, String: utf8; every column nullable). The writers take their layout from it ({@link
 * ArrowSpool}, {@link ArrowTables#writeRows}); the build exports every declaration into the jar
 * (io.cloudprofiler.spark.Tables), where the Python analysis reads its schemas, so that a reader
 * never repeats what a writer declares.
 *
 * @param id the name the Python side looks the table up by
 * @param folder {@link #APPLICATION} or {@link #EXECUTOR}
 */
public record Table(
    String id,
    String file,
    String folder,
    String meaning,
    List<String> columns,
    List<Class<?>> types) {

  /** The application's folder, {@code <logDir>/<app id>}. */
  public static final String APPLICATION = "application";

  /** Each executor's folder in the application's, {@code <host>-<executor id>}. */
  public static final String EXECUTOR = "executor";

  private static final Map<Class<?>, String> ARROW_TYPES =
      Map.of(
          Integer.class,
          "int32",
          Long.class,
          "int64",
          Double.class,
          "float64",
          String.class,
          "utf8");

  public Table {
    columns = List.copyOf(columns);
    types = List.copyOf(types);
    if (columns.size() != types.size())
      throw new IllegalArgumentException(
          file + " declares " + columns.size() + " columns and " + types.size() + " types");
    for (Class<?> type : types) {
      if (!ARROW_TYPES.containsKey(type))
        throw new IllegalArgumentException(
            file + ": " + type + " is no column type: expected one of " + ARROW_TYPES.keySet());
    }
    if (!folder.equals(APPLICATION) && !folder.equals(EXECUTOR))
      throw new IllegalArgumentException(
          file + ": folder " + folder + ": expected " + APPLICATION + " or " + EXECUTOR);
  }

  /** A table of {@code first}'s columns, then {@code more}'s (in that order). */
  public static Table of(
      String id,
      String file,
      String folder,
      String meaning,
      List<String> first,
      List<Class<?>> firstTypes,
      List<String> more,
      List<Class<?>> moreTypes) {
    List<String> columns = new ArrayList<>(first);
    columns.addAll(more);
    List<Class<?>> types = new ArrayList<>(firstTypes);
    types.addAll(moreTypes);
    return new Table(id, file, folder, meaning, columns, types);
  }

  /** The table's file in {@code folder} (a path or a Hadoop-compatible URI). */
  public String in(String folder) {
    return folder + "/" + file;
  }

  /** The column's Arrow type, by the name pyarrow's type_for_alias takes. */
  public String arrowType(int column) {
    return ARROW_TYPES.get(types.get(column));
  }
}
