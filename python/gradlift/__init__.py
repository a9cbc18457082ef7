"""gradlift from Python: compile a loss written in gradlift's language, call
its value, gradient and Hessian-vector products on numpy arrays.

    import gradlift, numpy as np
    f = gradlift.compile(source, fn="loss")
    v = f(w, X, y)
    v, (gw, gX, gy) = f.value_and_grad(w, X, y)
"""

import numpy as _np

from . import _gradlift
from ._gradlift import (  # noqa: F401
    CompileError,
    DifferentiationError,
    Error,
    ParseError,
    RuntimeError,
    TypeCheckError,
    UnknownFunctionError,
    cache_stats,
    disk_cache_stats,
)


class Function:
    """A compiled function of a gradlift program (see `compile`).

    Call it for the value; `value_and_grad`, `grad` and `hvp` for
    derivatives; `signature` and `parameters` describe it. Arguments are
    given in parameter order or by name. For optimizers that work on one
    flat vector (scipy.optimize), `pack`, `unpack` and
    `value_and_grad_flat` lay the differentiated parameters out end to end.
    """

    def __init__(self, native, wrt):
        self._native = native
        params = native.parameters
        self.wrt = list(wrt) if wrt is not None else [p for p in params if p not in native.size_parameters]
        self._wrt_index = [params.index(p) for p in self.wrt]
        self._wrt_index.sort()
        self.wrt = [params[i] for i in self._wrt_index]
        self._shapes = None

    def __call__(self, *args, **kwargs):
        return self._native(*args, **kwargs)

    def value_and_grad(self, *args, **kwargs):
        """(value, gradients): one float or numpy array per differentiated
        parameter, in parameter order."""
        return self._native.value_and_grad(*args, **kwargs)

    def grad(self, *args, **kwargs):
        """The gradients alone, as `value_and_grad` gives them."""
        return self._native.grad(*args, **kwargs)

    def hvp(self, *args, **kwargs):
        """`hvp(x1, …, xk, d1, …, dk)`: (value, gradient, H·d), with one
        direction per parameter that is not a size."""
        return self._native.hvp(*args, **kwargs)

    @property
    def signature(self):
        """The function's header as the language writes it."""
        return self._native.signature

    @property
    def parameters(self):
        """The parameters' names, in order."""
        return self._native.parameters

    def pack(self, *values):
        """The differentiated parameters' values (in parameter order), one
        flat float64 vector, tuples' components end to end; remembers
        their shapes for `unpack`."""
        if len(values) != len(self.wrt):
            raise TypeError(f"pack takes the {len(self.wrt)} differentiated parameters {self.wrt}, {len(values)} given")
        self._shapes = [_structure(v) for v in values]
        return _flat(values)

    def unpack(self, theta):
        """The differentiated parameters from a flat vector `pack` made: a
        list of floats, arrays and tuples in parameter order."""
        if self._shapes is None:
            raise ValueError("call pack(...) once first: it records the parameters' shapes")
        theta = _np.asarray(theta, dtype=_np.float64)
        want = sum(_count(s) for s in self._shapes)
        if theta.shape != (want,):
            raise ValueError(f"the flat vector has shape {theta.shape}, the packed parameters need ({want},)")
        at = [0]
        return [_rebuild(s, theta, at) for s in self._shapes]

    def _full(self, theta, rest):
        wrt = self.unpack(theta)
        n = len(self.parameters)
        if len(rest) != n - len(wrt):
            raise TypeError(
                f"{n - len(wrt)} other arguments expected (the parameters that are not differentiated, in order), {len(rest)} given"
            )
        args, w, r = [], iter(wrt), iter(rest)
        for i in range(n):
            args.append(next(w) if i in self._wrt_index else next(r))
        return args

    def value_flat(self, theta, *rest):
        """The value at the flat vector `theta` (see `pack`), the other
        parameters given after it in order."""
        return self._native(*self._full(theta, rest))

    def value_and_grad_flat(self, theta, *rest):
        """(value, flat gradient) at the flat vector `theta` (see `pack`),
        the other parameters given after it in order: what
        `scipy.optimize.minimize(f.value_and_grad_flat, f.pack(...),
        args=rest, jac=True)` calls."""
        value, grads = self._native.value_and_grad(*self._full(theta, rest))
        return value, _flat(grads)

    def __repr__(self):
        return f"<gradlift.Function {self.signature}>"


class _Leaf:
    """A packed number or array: its shape, and whether it holds integers
    (given back as integers, their slots carrying the gradient's 0)."""

    def __init__(self, v):
        a = _np.asarray(v)
        self.shape = a.shape
        self.integer = _np.issubdtype(a.dtype, _np.integer)
        self.size = int(_np.prod(self.shape))


def _structure(v):
    """A value's structure for `pack`: a list of its components' for a
    tuple, else a leaf."""
    if isinstance(v, tuple):
        return [_structure(x) for x in v]
    return _Leaf(v)


def _count(s):
    return sum(_count(x) for x in s) if isinstance(s, list) else s.size


def _leaves(v):
    if isinstance(v, tuple):
        for x in v:
            yield from _leaves(x)
    else:
        yield _np.ravel(_np.asarray(v, dtype=_np.float64))


def _flat(values):
    parts = [leaf for v in values for leaf in _leaves(v)]
    return _np.concatenate(parts) if parts else _np.zeros(0)


def _rebuild(s, theta, at):
    if isinstance(s, list):
        return tuple(_rebuild(x, theta, at) for x in s)
    part = theta[at[0]:at[0] + s.size]
    at[0] += s.size
    if s.integer:
        part = _np.rint(part).astype(_np.int64)
        return int(part[0]) if s.shape == () else part.reshape(s.shape)
    return float(part[0]) if s.shape == () else part.reshape(s.shape)


def compile(source, fn=None, wrt=None, path="<string>"):
    """Parses, checks and JIT-compiles the function `fn` of `source` (the
    last definition when not given). Its gradient is taken with respect to
    the parameters named in `wrt` (every parameter that is not a size when
    not given) and compiled on first use. `path` names the text in error
    messages. A repeated compile of the same text is a lookup."""
    return Function(_gradlift.compile(source, fn=fn, wrt=wrt, path=path), wrt)


def compile_file(path, fn=None, wrt=None):
    """`compile` of the text of the file at `path` (named by it in messages)."""
    with open(path, encoding="utf-8") as f:
        return compile(f.read(), fn=fn, wrt=wrt, path=str(path))


__all__ = [
    "cache_stats",
    "disk_cache_stats",
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
