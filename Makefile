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
# Spark 3.5's Connect server, which pyspark 3.5 does not ship (Spark 4's does): tests/test_spark35.py starts it with
# the plugin. Maven Central has none past 3.5.7 for Scala 2.12; it runs on the environment's 3.5.x (one line).
CONNECT35_VERSION = 3.5.7
CONNECT35_SHA256 = 15366e21273a874c760b51fa00743a2acb8fa78642cc35d7a076a3ade0c5eef6
CONNECT35_JAR = build/spark-connect_2.12-$(CONNECT35_VERSION).jar
CONNECT35_URL = https://repo1.maven.org/maven2/org/apache/spark/spark-connect_2.12/$(CONNECT35_VERSION)

# The Java formatter: google-java-format in Google style (the 2-space indent the sources already had), pinned by
# version and checksum, fetched from Maven Central into build/; on Java 17 it reaches into javac through the exports.
GJF_VERSION = 1.28.0
GJF_SHA256 = 32342e7c1b4600f80df3471da46aee8012d3e1445d5ea1be1fb71289b07cc735
GJF_JAR = build/google-java-format-$(GJF_VERSION).jar
GJF_URL = https://repo1.maven.org/maven2/com/google/googlejavaformat/google-java-format/$(GJF_VERSION)
GJF = java $(foreach p,api code file parser tree util,--add-exports=jdk.compiler/com.sun.tools.javac.$(p)=ALL-UNNAMED) \
  -jar $(GJF_JAR)
JAVA_FILES = $(shell find jvm-plugin/src -name '*.java')

.PHONY: demo test build bench native deps clean format format-check

demo: build
	$(VENV)/bin/cloudprofiler demo

test: build $(GJF_JAR) $(CONNECT35_JAR)
	make -C native test fuzz --no-print-directory
	$(PY) -m pytest tests -n 2 --dist loadfile -m 'not alone' --durations=15 -p no:cacheprovider
	$(PY) -m pytest tests -m alone -p no:cacheprovider

bench: build
	$(VENV)/bin/cloudprofiler bench handlers
	-$(VENV)/bin/cloudprofiler bench spark
	-$(VENV)/bin/cloudprofiler bench accuracy
	-$(VENV)/bin/cloudprofiler bench ingest
	-$(VENV)/bin/cloudprofiler bench analysis
	-$(VENV)/bin/cloudprofiler bench operators
	-$(VENV)/bin/cloudprofiler bench udfs
	-$(VENV)/bin/cloudprofiler bench live

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
	  'grpcio>=1.56,<2' 'grpcio-status>=1.56,<2' 'googleapis-common-protos>=1.56.4,<2' -c $(SPARK35)/constraints.txt
	touch $@

$(JAR_2_12): $(SPARK35_STAMP) $(shell find jvm-plugin/src native/src native/include -type f)
	PYTHON=$(SPARK35)/bin/python bash jvm-plugin/build.sh

$(GJF_JAR):
	mkdir -p build
	curl -sSfL -o $@.part $(GJF_URL)/google-java-format-$(GJF_VERSION)-all-deps.jar
	echo "$(GJF_SHA256)  $@.part" | sha256sum -c --quiet
	mv $@.part $@

$(CONNECT35_JAR):
	mkdir -p build
	curl -sSfL -o $@.part $(CONNECT35_URL)/spark-connect_2.12-$(CONNECT35_VERSION).jar
	echo "$(CONNECT35_SHA256)  $@.part" | sha256sum -c --quiet
	mv $@.part $@

# the Java sources formatted in place; format-check lists the files it would change (JAVA_FILES=... for others)
# twice: the first pass can leave a trailing comment that the second moves
format: $(GJF_JAR)
	$(GJF) --replace $(JAVA_FILES)
	$(GJF) --replace $(JAVA_FILES)

format-check: $(GJF_JAR)
	@$(GJF) --dry-run --set-exit-if-changed $(JAVA_FILES)

# the package build also compiles the plugin jar for .venv's pyspark (Scala 2.13) and carries the Scala 2.12 one
build: $(STAMP) native $(JAR_2_12)
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	$(SPARK35)/bin/python -m pip install -q --no-build-isolation --no-deps -e .

clean:
	make -C native clean
	rm -rf python/cloudprofiler/_lib python/cloudprofiler/_native*.so build jvm-plugin/build target project/target project/project
