"""gradlift from Python: compile a loss written in gradlift's language, call
its value, gradient and Hessian-vector products on numpy arrays.

    import gradlift, numpy as np
    f = gradlift.compile(source, fn="loss")
    v = f(w, X, y)
    v, (gw, gX, gy) = f.value_and_grad(w, X, y)
"""

from ._gradlift import (  # noqa: F401
    CompileError,
    DifferentiationError,
    Error,
    Function,
    ParseError,
    RuntimeError,
    TypeCheckError,
    UnknownFunctionError,
    compile,
)


def compile_file(path, fn=None, wrt=None):
    """`compile` of the text of the file at `path` (named by it in messages)."""
    with open(path, encoding="utf-8") as f:
        return compile(f.read(), fn=fn, wrt=wrt, path=str(path))


__all__ = [
    "compile",
    "compile_file",
    "Function",
    "Error",
    "ParseError",
    "TypeCheckError",
    "UnknownFunctionError",
    "RuntimeError",
    "DifferentiationError",
    "CompileError",
]
