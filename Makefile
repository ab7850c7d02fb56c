# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV = .venv
PY = $(VENV)/bin/python
STAMP = $(VENV)/.deps-installed
# pyspark 3.5 (Scala 2.12) in an environment of its own, kept in build/: the plugin's Scala 2.12 jar compiles against
# its jars, and tests/test_spark35.py runs on it, with the package installed from this tree as in .venv.
SPARK35 = build/pyspark-3.5
SPARK35_STAMP = $(SPARK35)/.deps-installed
JAR_2_12 = jvm-plugin/build/cloudprofiler-plugin_2.12.jar

.PHONY: demo test build bench native deps clean

demo: build
	$(VENV)/bin/cloudprofiler demo

test: build
	make -C native test --no-print-directory
	$(PY) -m pytest tests --durations=15 -p no:cacheprovider

bench: build
	$(VENV)/bin/cloudprofiler bench handlers
	-$(VENV)/bin/cloudprofiler bench spark
	-$(VENV)/bin/cloudprofiler bench accuracy
	-$(VENV)/bin/cloudprofiler bench ingest
	-$(VENV)/bin/cloudprofiler bench analysis

# System packages: libzstd-dev for the native library, a JDK for Spark and the plugin, clang-format for the C style
# check of the native tests and chromium for the report's browser test (each says so and skips where it cannot be
# installed).
deps:
	@if [ ! -f /usr/include/zstd.h ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q libzstd-dev; \
	  else echo "libzstd-dev is missing: run 'sudo apt-get install libzstd-dev' and retry" >&2; exit 1; fi; fi
	@command -v clang-format >/dev/null || [ "$$(id -u)" != 0 ] || \
	  { apt-get update -q && apt-get install -y -q clang-format; } || echo "clang-format could not be installed" >&2
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else echo "chromium is missing: the report's browser test will skip ('sudo apt-get install chromium')" >&2; fi; fi
	@command -v javac >/dev/null || { echo "javac is missing: install a JDK 17 (e.g. apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }

# pyproject.toml is the one list: its build requirements, the core dependencies and every extra, installed before
# the package because its build needs them (the plugin jar compiles against pyspark's jars).
define REQUIREMENTS
try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib
with open("pyproject.toml", "rb") as f:
    toml = tomllib.load(f)
extras = toml["project"]["optional-dependencies"].values()
print(*toml["build-system"]["requires"], *toml["project"]["dependencies"], *(r for e in extras for r in e), sep="\n")
endef
export REQUIREMENTS

$(STAMP): pyproject.toml | deps
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'tomli; python_version < "3.11"'
	$(PY) -c "$$REQUIREMENTS" > $(VENV)/requirements.txt
	$(PY) -m pip install -q -r $(VENV)/requirements.txt
	touch $@

native: deps
	make -C native --no-print-directory

$(SPARK35_STAMP): $(STAMP)
	[ -x $(SPARK35)/bin/python ] || $(PYTHON) -m venv $(SPARK35)
	$(PY) -m pip freeze | grep -iE '^(cffi|numpy|pyarrow|pandas)==' > $(SPARK35)/constraints.txt
	$(SPARK35)/bin/python -m pip install -q 'pyspark>=3.5,<3.6' 'setuptools>=77' cffi numpy pyarrow pandas \
	  -c $(SPARK35)/constraints.txt
	touch $@

$(JAR_2_12): $(SPARK35_STAMP) $(shell find jvm-plugin/src native/src native/include -type f)
	PYTHON=$(SPARK35)/bin/python bash jvm-plugin/build.sh

# the package build also compiles the plugin jar for .venv's pyspark (Scala 2.13) and carries the Scala 2.12 one
build: $(STAMP) native $(JAR_2_12)
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	$(SPARK35)/bin/python -m pip install -q --no-build-isolation --no-deps -e .

clean:
	make -C native clean
	rm -rf python/cloudprofiler/_lib python/cloudprofiler/_native*.so build jvm-plugin/build target project/target project/project
