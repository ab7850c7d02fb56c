"""Benchmarks behind `cloudprofiler bench <target>`: each prints a table, or JSON with --json."""
