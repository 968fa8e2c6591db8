#!/usr/bin/env python3
"""The README's cross-language parity table, kept true.

Every row names, for each of Python, Java, Go and Rust, the tests (and, for
the per-call row, the benchmark) that show the capability in that binding:
`file::name` for a test function or method, `file` for a whole file. This
check fails when a row leaves a language without one, when a file is not
there, or when a named test is not defined in it, so the table cannot claim
what the tests no longer show. Usage: check_parity_table.py [source root]
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
BEGIN = "<!-- parity table: checked by tests/check_parity_table.py -->"
# Where each language's files are looked up (then the source root).
FOLDERS = {
    "Python": ["bindings/python/tests", "bench/python"],
    "Java": ["bindings/java/src/test/java/org/deft", "bench/java", "bindings/java"],
    "Go": ["bindings/go", "bench/go"],
    "Rust": ["bindings/rust/deft/tests", "bench/rust", "bindings/rust"],
}
# How each language defines a test: `name` after one of these words.
DEFINES = r"(?:def|void|func|fn)\s+{name}\s*\("
REF = re.compile(r"`([\w./-]+\.(?:py|java|go|rs|cmake|toml))(?:::(\w+))?`")


def table_rows(text):
    start = text.find(BEGIN)
    if start < 0:
        sys.exit(f"README.md has no '{BEGIN}' line before the parity table")
    lines = text[start:].splitlines()[1:]
    header = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return header, rows


def find(language, name):
    for folder in FOLDERS[language] + [""]:
        path = ROOT / folder / name
        if path.is_file():
            return path
    return None


def main():
    header, rows = table_rows((ROOT / "README.md").read_text())
    if header[1:] != list(FOLDERS):
        sys.exit(f"the parity table's columns are {header[1:]}, expected {list(FOLDERS)}")
    problems = []
    for row in rows:
        capability = row[0]
        if len(row) != len(header):
            problems.append(f"{capability}: {len(row)} cells, expected {len(header)}")
            continue
        for language, cell in zip(header[1:], row[1:]):
            refs = REF.findall(cell)
            if not refs:
                problems.append(f"{capability} / {language}: names no test")
            for file, name in refs:
                path = find(language, file)
                if path is None:
                    problems.append(f"{capability} / {language}: no file {file}")
                elif name and not re.search(DEFINES.format(name=re.escape(name)),
                                            path.read_text()):
                    problems.append(f"{capability} / {language}: {file} defines no {name}")
    for p in problems:
        print(p)
    print(f"{len(rows)} rows, {len(problems)} problems")
    return 1 if problems or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
