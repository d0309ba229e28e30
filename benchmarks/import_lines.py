"""How many lines of scanrl a copy of an algorithm file loads when it is imported: copy the
file into an empty folder, import it from there, and count the lines of every `scanrl`
module in `sys.modules`.

    python benchmarks/import_lines.py algos/ppo.py
"""

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path


def main(path: str) -> None:
    copy = Path(tempfile.mkdtemp()) / "my_algorithm.py"
    shutil.copy(path, copy)
    spec = importlib.util.spec_from_file_location("my_algorithm", copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules["my_algorithm"] = module  # a dataclass needs its module registered
    spec.loader.exec_module(module)
    files = sorted({m.__file__ for name, m in list(sys.modules.items())
                    if name.startswith("scanrl") and getattr(m, "__file__", None)})
    total = 0
    for file in files:
        lines = len(Path(file).read_text().splitlines())
        total += lines
        print(f"{lines:6d}  {file}")
    print(f"{total:6d}  lines of scanrl in {len(files)} files")


if __name__ == "__main__":
    main(sys.argv[1])
