"""How many lines of scanrl a copy of an algorithm file loads when it is imported: copy the
file into an empty folder, import it from there, and count the lines of every `scanrl`
module in `sys.modules`: all lines, and code lines (not blank, not a comment, not a docstring).

    python benchmarks/import_lines.py algos/ppo.py
"""

import ast
import importlib.util
import io
import shutil
import sys
import tempfile
import tokenize
from pathlib import Path


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - docstrings)


def main(path: str) -> None:
    copy = Path(tempfile.mkdtemp()) / "my_algorithm.py"
    shutil.copy(path, copy)
    spec = importlib.util.spec_from_file_location("my_algorithm", copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules["my_algorithm"] = module  # a dataclass needs its module registered
    spec.loader.exec_module(module)
    files = sorted({m.__file__ for name, m in list(sys.modules.items())
                    if name.startswith("scanrl") and getattr(m, "__file__", None)})
    total = total_code = 0
    for file in files:
        text = Path(file).read_text()
        lines, code = len(text.splitlines()), code_lines(text)
        total, total_code = total + lines, total_code + code
        print(f"{lines:6d} {code:6d}  {file}")
    print(f"{total:6d} {total_code:6d}  lines and code lines of scanrl in {len(files)} files")


if __name__ == "__main__":
    main(sys.argv[1])
