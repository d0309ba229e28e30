"""Two full-suite logs compared test by test: each test's seconds (call, setup and teardown, from
pytest's `--durations=0` lines) summed over the tests in both logs, over those in one only, and
the new tests' seconds by file; the largest changes among the tests in both.

    PYTEST_ADDOPTS=--durations=0 bash .ci/run > before.txt 2>&1   # in a clone of each tree
    python benchmarks/suite_durations.py before.txt after.txt
"""

import re
import sys
from collections import defaultdict


def seconds(path: str) -> dict[str, float]:
    """test id -> seconds (pytest hides durations under 5 ms: those tests are absent)."""
    out = defaultdict(float)
    for line in open(path, errors="replace"):
        found = re.match(r"^\s*([\d.]+)s (call|setup|teardown)\s+(\S+)", line)
        if found:
            out[found.group(3)] += float(found.group(1))
    return out


def main(before_path: str, after_path: str) -> None:
    before, after = seconds(before_path), seconds(after_path)
    both = set(before) & set(after)
    for path in (before_path, after_path):
        summary = [line.strip() for line in open(path, errors="replace") if " passed" in line]
        print(f"{path}: {summary[-1] if summary else 'no pytest summary'}")
    print(f"tests with a duration: {len(before)} / {len(after)}; in both: {len(both)}")
    b, a = sum(before[k] for k in both), sum(after[k] for k in both)
    print(f"test seconds of the tests in both: {b:.1f} / {a:.1f} ({a / b:.3f}x)")
    for name, side, other in (("second", after, before), ("first", before, after)):
        only = set(side) - set(other)
        print(f"only in the {name}: {len(only)} tests, {sum(side[k] for k in only):.1f} s")
    files = defaultdict(lambda: [0, 0.0])
    for k in set(after) - set(before):
        files[k.split("::")[0]][0] += 1
        files[k.split("::")[0]][1] += after[k]
    for file, (count, total) in sorted(files.items(), key=lambda x: -x[1][1]):
        print(f"  new in {file}: {count} tests, {total:.1f} s")
    changes = sorted((after[k] - before[k], k) for k in both)
    print("largest changes among the tests in both:")
    for change, k in changes[-5:][::-1] + changes[:5]:
        print(f"  {change:+7.1f} s ({before[k]:.1f} -> {after[k]:.1f}) {k}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
