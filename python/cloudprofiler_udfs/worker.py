"""PySpark's worker (pyspark.worker) timing every batch of the Python UDFs it runs (cloudprofiler.spark.udf_timing),
for workers the JVM starts one by one without PySpark's daemon (spark.python.use.daemon=false, Spark's default on
Windows). The helper names it in `spark.python.worker.module` beside the daemon when spark.cloudprofiler.udfs=true;
where the daemon runs, Spark 3.5 never imports a worker module and Spark 4's daemon only one named "pyspark...", so
this module then plays no part.

Started as `python -m cloudprofiler_udfs.worker`, it wraps pyspark.worker's functions, then runs that module's own
entry point (its block under `__name__ == "__main__"`, which connects to the JVM and differs between Spark 3.5 and
4.x) in the module's namespace, where the wrapped functions are found. A failure leaves the UDFs untimed, with one
line in the executor's log; the worker then runs as PySpark's own.
"""
import ast
import os
import sys


def _untimed(why: str) -> None:
    print(f"cloudprofiler: the Python UDFs of worker {os.getpid()} are not timed: {why}", file=sys.stderr, flush=True)


def _timed() -> None:
    try:
        from cloudprofiler.spark.udf_timing import install

        install()
    except Exception as e:  # noqa: BLE001 -- the UDFs run as they would without the profiler
        _untimed(f"{type(e).__name__}: {e}")


def entry_point(module) -> "object | None":
    """The code of `module`'s block under `if __name__ == "__main__":`, compiled with its file's line numbers; None
    where it has none. Its source is read by its loader: PySpark's workers import pyspark from a zip file."""
    lines = (module.__loader__.get_source(module.__name__) or "").splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.startswith("if __name__ ==") and "__main__" in line:
            block = ast.parse("".join(lines[number:])).body[0]
            if isinstance(block, ast.If):
                ast.increment_lineno(block, number)
                return compile(ast.Module(body=block.body, type_ignores=[]), module.__file__, "exec")
    return None


def main(infile, outfile):
    """A worker module's entry for a daemon that imports one (PySpark's contract: main(infile, outfile))."""
    _timed()
    from pyspark.worker import main as worker_main

    return worker_main(infile, outfile)


if __name__ == "__main__":
    import pyspark.worker

    try:
        code = entry_point(pyspark.worker)
    except Exception as e:  # noqa: BLE001 -- the worker runs as PySpark's own
        code, why = None, f"{type(e).__name__}: {e}"
    else:
        why = "pyspark.worker has no entry point"
    if code is None:  # a PySpark whose worker starts otherwise: run it as the JVM asked, untimed
        import runpy

        _untimed(why)
        runpy.run_module("pyspark.worker", run_name="__main__")
    else:
        _timed()
        exec(code, vars(pyspark.worker))
