"""Sum JUnit XML reports into one closing line: `tests: N passed, N failed, N skipped`."""

import collections
import pathlib
import sys

from verdict import read_cases


def main(dirs: list[str]) -> int:
    count: collections.Counter[str] = collections.Counter()
    for d in dirs:
        for f in sorted(pathlib.Path(d).glob("**/*.xml")):
            count.update(c.outcome for c in read_cases(f))
    print(f"tests: {count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
