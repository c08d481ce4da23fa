"""Issue 24: one progress protocol in the engine (`engine.io.progress.Progress`, `progress(fraction,
message)`). Five signatures were found (a float alone, (done, total), (done, total, path), (n, total,
label), (n, total, job)); the UI guessed which one it got. Every engine function that takes a progress
callback annotates it `Progress | None`, and none takes an `on_progress`."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine"


def test_every_progress_parameter_of_the_engine_is_the_one_protocol():
    wrong = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for a in args:
                where = f"{path.relative_to(ENGINE.parent)}:{node.lineno} {node.name}({a.arg})"
                if a.arg == "on_progress":
                    wrong.append(f"{where}: a second progress callback")
                elif a.arg == "progress" and a.annotation is not None:
                    text = ast.unparse(a.annotation).replace(" ", "")
                    if text not in {"Progress|None", "Progress"}:
                        wrong.append(f"{where}: annotated {ast.unparse(a.annotation)}")
    assert not wrong, "\n".join(wrong)
