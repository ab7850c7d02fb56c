"""TPC-H on Spark: the data from the real generator (`tpchgen-cli`, the `tpch` extra) as Parquet, its eight tables as
temporary views of a session, and the specification's 22 queries with its validation parameters (the files of
`tpch_queries/`, shipped with the package).

    folder = generate("~/.cache/cloudprofiler/tpch", scale=1)   # <root>/sf1, generated once, reused after
    register(spark, folder)
    rows = spark.sql(query("q01")).collect()
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from ..private_files import CACHE_ROOT

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
QUERIES = tuple(f"q{n:02d}" for n in range(1, 23))
# rows per table at scale factor 1 (the specification's section 4.2.5); region and nation are fixed, lineitem's is
# about 6,000,000 (1 to 7 lines per order)
ROWS_AT_SCALE_1 = {"region": 5, "nation": 25, "supplier": 10_000, "customer": 150_000, "part": 200_000,
                   "partsupp": 800_000, "orders": 1_500_000, "lineitem": 6_000_000}
FIXED_SIZE = ("region", "nation")
MARKER = "_COMPLETE"  # written last into a scale factor's folder: the data there is whole
DEFAULT_ROOT = Path(CACHE_ROOT) / "tpch"
GENERATOR = "tpchgen-cli"


def generator_program() -> str:
    """`tpchgen-cli`: the one on PATH, else the one installed beside this interpreter (a virtual environment's bin/,
    run without activating it)."""
    found = shutil.which(GENERATOR) or shutil.which(GENERATOR, path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit(f"{GENERATOR} is not installed: pip install 'cloudprofiler[tpch]' (or pip install "
                         f"{GENERATOR})")
    return found


def scale_folder(root: "str | Path", scale: float) -> Path:
    """The folder of scale factor `scale` under `root`: sf1, sf0.1, sf0.01."""
    return Path(root).expanduser() / f"sf{scale:g}"


def generate(root: "str | Path", scale: float) -> Path:
    """The TPC-H tables at `scale` as Parquet files `<table>.parquet` in `scale_folder(root, scale)`, which is
    returned. A folder that holds `MARKER` is complete and reused; else the generator writes into a temporary
    folder beside it, the marker goes in last, and the folder is renamed into place (a run cut short leaves no
    folder that looks whole; two runs at once both generate, and the first rename wins)."""
    if scale <= 0:
        raise ValueError(f"the scale factor must be > 0, got {scale}")
    folder = scale_folder(root, scale)
    if (folder / MARKER).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        program = generator_program()
        out = subprocess.run([program, "parquet", "--scale-factor", f"{scale:g}", "--output-dir", str(temporary),
                              "--quiet"], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"{GENERATOR} at scale factor {scale:g} failed ({out.returncode}): "
                               f"{out.stderr[-2000:]}")
        missing = [t for t in TABLES if not (temporary / f"{t}.parquet").is_file()]
        if missing:
            raise RuntimeError(f"{GENERATOR} at scale factor {scale:g} wrote no {', '.join(missing)} into "
                               f"{temporary}")
        version = subprocess.run([program, "--version"], capture_output=True, text=True).stdout.strip()
        (temporary / MARKER).write_text(json.dumps({"scale_factor": scale, "generator": version,
                                                    "tables": list(TABLES)}) + "\n")
        if folder.exists() and not (folder / MARKER).is_file():
            shutil.rmtree(folder)  # not ours to keep: no marker, so not whole
        try:
            temporary.rename(folder)
        except OSError:
            if not (folder / MARKER).is_file():  # not another run's complete folder, which wins
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return folder


def register(spark, folder: "str | Path") -> None:
    """The eight tables of `folder` (a `generate`d one) as temporary views of `spark`, named as the tables."""
    for table in TABLES:
        spark.read.parquet(str(Path(folder) / f"{table}.parquet")).createOrReplaceTempView(table)


def query(name: str) -> str:
    """The text of TPC-H query `name` (q01 to q22) in Spark SQL."""
    if name not in QUERIES:
        raise ValueError(f"no TPC-H query {name!r}: expected one of q01 to q22")
    return resources.files(__package__).joinpath("tpch_queries", f"{name}.sql").read_text()
