"""The repository's style, checked by the ecosystem's tools: ruff for Python (config in pyproject.toml),
google-java-format for Java (`make format`; its version, checksum and flags in the Makefile), and lines that a
side-by-side diff shows (120 characters) in the docs and the Java sources. The C style is checked by
`make -C native test` (clang-format, config in .clang-format)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 120


def test_python_passes_ruff():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is missing: pip install -e '.[test]'"
    result = subprocess.run([ruff, "check", "python", "tests", "examples"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def long_lines(paths, skip=lambda line: False):
    return [f"{p.name}:{n}" for p in paths for n, line in enumerate(p.read_text().splitlines(), 1)
            if len(line) > LIMIT and not skip(line)]


def test_docs_and_java_lines_fit_a_side_by_side_diff():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert long_lines(docs, skip=lambda line: line.startswith("|")) == []  # a table row is one line
    assert long_lines(sorted((ROOT / "jvm-plugin" / "src").rglob("*.java"))) == []


def test_the_check_finds_a_long_line(tmp_path):
    sample = tmp_path / "sample.md"
    sample.write_text("x" * LIMIT + "\n" + "x" * (LIMIT + 1) + "\n| " + "y" * LIMIT + " |\n")
    assert long_lines([sample], skip=lambda line: line.startswith("|")) == ["sample.md:2"]


def java_format_check(*files: Path) -> subprocess.CompletedProcess:
    """`make format-check`: google-java-format lists the files it would change and fails if there are any."""
    only = [f"JAVA_FILES={' '.join(map(str, files))}"] if files else []
    return subprocess.run(["make", "--no-print-directory", "format-check", *only], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_java_sources_are_formatted():
    result = java_format_check()
    assert result.returncode == 0, f"run `make format`; not formatted:\n{result.stdout}{result.stderr[-2000:]}"


def test_the_java_format_check_finds_a_misformatted_file(tmp_path):
    source = (ROOT / "jvm-plugin" / "src" / "main" / "java" / "io" / "cloudprofiler" / "spark" /
              "CloudProfilerPlugin.java").read_text()
    formatted, misformatted = tmp_path / "Formatted.java", tmp_path / "Misformatted.java"
    formatted.write_text(source)
    misformatted.write_text(source.replace("\n  ", "\n   ", 1))  # one line indented by 3 spaces instead of 2
    result = java_format_check(formatted, misformatted)
    assert result.returncode != 0 and result.stdout.split() == [str(misformatted)], result.stdout + result.stderr
