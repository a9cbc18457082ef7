//! The syntax tree of the whole language: Source (Figure 2 and the
//! extensions of §7 and Appendix A) and the Target-only forms of Figure 3
//! (lambdas with typed parameters, application, n-tuples, scans, shifts).
//!
//! Every node carries the [`Span`] of the text it was parsed from
//! ([`Span::DUMMY`] for terms a pass builds). Equality of trees ignores spans
//! (see [`Expr::same`]), which is what the printer/parser round trip promises.
//!
//! Deep terms are ordinary boxed trees; every recursive walk goes through
//! [`crate::deep::guard`], which moves to a heap-allocated stack segment when
//! the native stack runs low, so a 100,000-binding `let` chain is as safe as a
//! short one. Dropping a tree is guarded the same way.

use crate::prim::Prim;
pub use crate::schedule::Schedule;
use crate::span::Span;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// An identifier.
pub type Name = Arc<str>;

/// A size expression in normal form: `constant + Σ coefficient·variable`,
/// variables sorted, no zero coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Size {
    /// The constant term.
    pub constant: i64,
    /// Variable → coefficient, without zeros.
    pub terms: BTreeMap<Name, i64>,
}

impl Size {
    /// The literal size `n`.
    pub fn lit(n: i64) -> Size {
        Size {
            constant: n,
            terms: BTreeMap::new(),
        }
    }

    /// The size variable `name`.
    pub fn var(name: Name) -> Size {
        let mut terms = BTreeMap::new();
        terms.insert(name, 1);
        Size { constant: 0, terms }
    }

    /// `self + k·other`. Arithmetic saturates; the type checker rejects
    /// sizes beyond [`Size::LIMIT`], so saturation never goes unnoticed.
    pub fn add_scaled(&self, other: &Size, k: i64) -> Size {
        let mut out = self.clone();
        out.constant = out
            .constant
            .saturating_add(k.saturating_mul(other.constant));
        for (v, c) in &other.terms {
            let e = out.terms.entry(v.clone()).or_insert(0);
            *e = e.saturating_add(k.saturating_mul(*c));
            if *e == 0 {
                out.terms.remove(v);
            }
        }
        out
    }

    /// `self + other`.
    pub fn plus(&self, other: &Size) -> Size {
        self.add_scaled(other, 1)
    }

    /// `self + n`.
    pub fn offset(&self, n: i64) -> Size {
        let mut out = self.clone();
        out.constant = out.constant.saturating_add(n);
        out
    }

    /// Largest constant or coefficient a size may have (2⁴⁰).
    pub const LIMIT: i64 = 1 << 40;

    /// Whether every number in the size is within ±[`Size::LIMIT`].
    pub fn is_within_limit(&self) -> bool {
        self.constant.abs() <= Size::LIMIT && self.terms.values().all(|c| c.abs() <= Size::LIMIT)
    }

    /// `k·self`.
    pub fn scale(&self, k: i64) -> Size {
        Size::lit(0).add_scaled(self, k)
    }

    /// The value of a size without variables.
    pub fn as_literal(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// Replaces each variable by the size `subst` gives it (variables it does
    /// not mention stay).
    pub fn substitute(&self, subst: &dyn Fn(&Name) -> Option<Size>) -> Size {
        let mut out = Size::lit(self.constant);
        for (v, c) in &self.terms {
            match subst(v) {
                Some(s) => out = out.add_scaled(&s, *c),
                None => out = out.add_scaled(&Size::var(v.clone()), *c),
            }
        }
        out
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (v, &c) in &self.terms {
            let (sign, mag) = if c < 0 { ("-", -c) } else { ("+", c) };
            match (first, sign) {
                (true, "-") => f.write_str("-")?,
                (true, _) => {}
                (false, s) => f.write_str(s)?,
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            f.write_str(v)?;
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)
        } else if self.constant > 0 {
            write!(f, "+{}", self.constant)
        } else if self.constant < 0 {
            write!(f, "-{}", -self.constant)
        } else {
            Ok(())
        }
    }
}

/// A type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// `R`, a 64-bit float.
    Real,
    /// `Z`, a 64-bit two's-complement integer. Integers are data: they are
    /// never differentiated (their cotangents and tangents are zero).
    Int,
    /// The type of a condition. It is not a value type: conditions appear
    /// only after `if` and under `and`, `or`, `not`.
    Bool,
    /// `(T1, ..., Tk)`, k ≥ 2 (k = 0 is the unit tuple `()`).
    Tuple(Vec<Type>),
    /// `[T; n]`.
    Array(Box<Type>, Size),
    /// `(T1, ..., Tk) -> T`, the type of a lambda (Target only).
    Fun(Vec<Type>, Box<Type>),
}

impl Type {
    /// `[elem; size]`.
    pub fn array(elem: Type, size: Size) -> Type {
        Type::Array(Box::new(elem), size)
    }

    /// True for types built from `R`, tuples and arrays (the paper's ground
    /// types G of Figure 4).
    pub fn is_ground(&self) -> bool {
        match self {
            Type::Real | Type::Int => true,
            Type::Bool | Type::Fun(..) => false,
            Type::Tuple(ts) => ts.iter().all(Type::is_ground),
            Type::Array(t, _) => t.is_ground(),
        }
    }

    /// Applies a size substitution to every size in the type.
    pub fn substitute(&self, subst: &dyn Fn(&Name) -> Option<Size>) -> Type {
        match self {
            Type::Real | Type::Int | Type::Bool => self.clone(),
            Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| t.substitute(subst)).collect()),
            Type::Array(t, n) => Type::array(t.substitute(subst), n.substitute(subst)),
            Type::Fun(ps, r) => Type::Fun(
                ps.iter().map(|t| t.substitute(subst)).collect(),
                Box::new(r.substitute(subst)),
            ),
        }
    }
}

/// A binding pattern: a name, `_`, or a tuple of patterns.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// Binds a name.
    Var(Name, Span),
    /// Binds nothing.
    Wild(Span),
    /// Destructures a tuple.
    Tuple(Vec<Pattern>, Span),
}

impl Pattern {
    /// Where the pattern was written.
    pub fn span(&self) -> Span {
        match self {
            Pattern::Var(_, s) | Pattern::Wild(s) | Pattern::Tuple(_, s) => *s,
        }
    }

    /// The names bound, left to right.
    pub fn names(&self, out: &mut Vec<Name>) {
        match self {
            Pattern::Var(n, _) => out.push(n.clone()),
            Pattern::Wild(_) => {}
            Pattern::Tuple(ps, _) => ps.iter().for_each(|p| p.names(out)),
        }
    }

    /// Equality ignoring spans.
    pub fn same(&self, other: &Pattern) -> bool {
        match (self, other) {
            (Pattern::Var(a, _), Pattern::Var(b, _)) => a == b,
            (Pattern::Wild(_), Pattern::Wild(_)) => true,
            (Pattern::Tuple(a, _), Pattern::Tuple(b, _)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            _ => false,
        }
    }
}

/// A lambda parameter: a pattern and, in Target terms, its type.
#[derive(Clone, Debug)]
pub struct Param {
    /// What it binds.
    pub pat: Pattern,
    /// Its declared type (required on lambdas that are not the function
    /// argument of an array operation).
    pub ty: Option<Type>,
}

/// The array operations that take a function argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayOp {
    /// `map F A`
    Map,
    /// `map2 F A B`
    Map2,
    /// `reduce F z A`
    Reduce,
    /// `foldl F z A`, with the checkpoint schedule of its reverse
    /// (`@checkpoint(…) foldl F z A`; `None` keeps every state).
    Foldl(Option<Schedule>),
    /// `scanl F z A`
    Scanl,
    /// `scanr F z A`
    Scanr,
    /// `@checkpoint(…) revfold VJP STEP v A z f` (Target only): the reverse
    /// of `foldl STEP v A` under a checkpoint schedule. `STEP: (S, E) -> S`;
    /// `VJP: (S, E, S, F) -> (S, P, F)` maps a state, an element, the
    /// cotangent of the next state and an accumulator to the cotangent of
    /// the state, the step's result `P` and the updated accumulator. The
    /// result is `(v̄, [P; n], f')`: the cotangent of `v`, each step's
    /// result, and the accumulator after every step, each step reversed
    /// once, from the last. (Reverse mode makes `P` the element's
    /// cotangent, `()` when the step ignores its element, or either with
    /// the positions and values of the free arrays the step read at
    /// computed positions.)
    Revfold(Schedule),
    /// `while F v`: the loop that stops on a condition. `F: S -> (Z, S)`
    /// says whether to go on and gives the next state: from `s = v`, while
    /// `F(s) = (k, s')` has `k ≠ 0`, `s = s'`; the result is the first `s`
    /// with `k = 0`. Written `loop p = v while c do e`, which is
    /// `while (p. if c then (1, e) else (0, p)) v`.
    While,
    /// `@checkpoint(binomial:C) revwhile VJP STEP v k z f` (Target only):
    /// the reverse of a `while` loop that ran `k` steps from `v`, on a
    /// binomial checkpoint schedule. It is `revfold` over `k` steps without
    /// elements: `STEP: (S, ()) -> S`, `VJP: (S, (), S, F) -> (S, (), F)`;
    /// the result is `(v̄, f')`.
    Revwhile(Schedule),
}

impl ArrayOp {
    /// The keyword.
    pub fn name(self) -> &'static str {
        match self {
            ArrayOp::Map => "map",
            ArrayOp::Map2 => "map2",
            ArrayOp::Reduce => "reduce",
            ArrayOp::Foldl(_) => "foldl",
            ArrayOp::Revfold(_) => "revfold",
            ArrayOp::While => "while",
            ArrayOp::Revwhile(_) => "revwhile",
            ArrayOp::Scanl => "scanl",
            ArrayOp::Scanr => "scanr",
        }
    }

    /// Number of arguments after the function.
    pub fn arity(self) -> usize {
        match self {
            ArrayOp::Map | ArrayOp::While => 1,
            ArrayOp::Revfold(_) | ArrayOp::Revwhile(_) => 5,
            _ => 2,
        }
    }

    /// Number of arguments the function takes.
    pub fn fn_arity(self) -> usize {
        match self {
            ArrayOp::Map | ArrayOp::While => 1,
            ArrayOp::Revfold(_) | ArrayOp::Revwhile(_) => 4,
            _ => 2,
        }
    }

    /// `foldl` without a checkpoint schedule.
    pub const FOLDL: ArrayOp = ArrayOp::Foldl(None);

    /// The checkpoint schedule written on the operation.
    pub fn schedule(self) -> Option<Schedule> {
        match self {
            ArrayOp::Foldl(s) => s,
            ArrayOp::Revfold(s) | ArrayOp::Revwhile(s) => Some(s),
            _ => None,
        }
    }
}

/// Built-in array forms without a function argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `len(A)`: the length, an integer.
    Len,
    /// `iota(n)`: `[0, 1, ..., n-1]`, integers.
    Iota,
    /// `replicate(n, e)`: `n` copies of `e`.
    Replicate,
    /// `concat(A, B)`.
    Concat,
    /// `take(k, A)`: the first `k` elements (`k` a size, at most `len(A)`).
    Take,
    /// `drop(k, A)`: all but the first `k` elements.
    Drop,
    /// `shift1L A`: drop the first element.
    Shift1L,
    /// `shift1R A`: drop the last element.
    Shift1R,
    /// `A[i]` with a computed integer index `i` (a constant index is
    /// [`ExprKind::Index`]): `-len(A) ≤ i < len(A)`, a negative `i`
    /// counting from the end; any other `i` is a run-time error.
    Get,
    /// `gather(A, idx)`: `[A[idx[0]], …, A[idx[m-1]]]`, each index as in
    /// [`Builtin::Get`].
    Gather,
    /// `reduce_by_index(dest, (op), idx, vals)`, written with the
    /// arguments `[dest, idx, vals]`: the bins `dest` with every `vals[i]`
    /// combined into bin `idx[i]` by `op`, in the order of `i` (each index
    /// as in [`Builtin::Get`]). `op` is `+` (any element type made of
    /// reals, component by component), `*`, `min` or `max` (reals).
    ReduceByIndex(Prim),
    /// `transpose(M)` for `M : [[T; c]; r]`, written with the arguments
    /// `[c, M]` (the count of columns, a size the type checker adds, so
    /// that a matrix of no rows has its c empty columns): `[[T; r]; c]`.
    Transpose,
    /// `matmul(A, B)` for `A : [[R; k]; m]`, `B : [[R; n]; k]`, written
    /// with the arguments `[n, A, B]` (the count of columns of the result,
    /// a size the type checker adds, so that a product with `k = 0` has
    /// its `n` columns of zeros): the matrix product `[[R; n]; m]`,
    /// `C[i][j] = Σₗ A[i][l]·B[l][j]`, computed by the matrix kernel of
    /// [`crate::kernels`] in its order of summation, in every engine.
    MatMul,
}

impl Builtin {
    /// The keyword.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Len => "len",
            Builtin::Iota => "iota",
            Builtin::Replicate => "replicate",
            Builtin::Concat => "concat",
            Builtin::Take => "take",
            Builtin::Drop => "drop",
            Builtin::Shift1L => "shift1L",
            Builtin::Shift1R => "shift1R",
            Builtin::Get => "index",
            Builtin::Gather => "gather",
            Builtin::ReduceByIndex(_) => "reduce_by_index",
            Builtin::Transpose => "transpose",
            Builtin::MatMul => "matmul",
        }
    }

    /// Whether `reduce_by_index` takes the operator `p`.
    pub fn histogram_operator(p: Prim) -> bool {
        matches!(p, Prim::Add | Prim::Mul | Prim::Min | Prim::Max)
    }

    /// Number of arguments.
    pub fn arity(self) -> usize {
        match self {
            Builtin::Replicate
            | Builtin::Concat
            | Builtin::Take
            | Builtin::Drop
            | Builtin::Get
            | Builtin::Gather
            | Builtin::Transpose => 2,
            Builtin::ReduceByIndex(_) | Builtin::MatMul => 3,
            _ => 1,
        }
    }

    /// Whether its first argument is a size expression (a count the
    /// program gives, or one the type checker adds): it is never
    /// differentiated and stays a size through every pass.
    pub fn size_first(self) -> bool {
        matches!(
            self,
            Builtin::Iota
                | Builtin::Replicate
                | Builtin::Take
                | Builtin::Drop
                | Builtin::Transpose
                | Builtin::MatMul
        )
    }

    /// Whether it is written with juxtaposition (`shift1L A`) rather than as
    /// a call (`len(A)`).
    pub fn is_juxtaposed(self) -> bool {
        matches!(self, Builtin::Shift1L | Builtin::Shift1R)
    }
}

/// The derivative operators, applied to a function value inside any
/// expression: `grad(F, a₁, …, a_k)` and the others below. They are
/// expanded, innermost first, into ordinary terms before anything else
/// reads the program (`gradlift_ad::derivatives`), so no later pass, the
/// cost model or the JIT ever sees one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Derivative {
    /// `grad(F, a₁, …, a_k)` for `F : (T₁, …, T_k) → R`: the gradient with
    /// respect to every argument (a `T₁`, or a tuple of them), by reverse
    /// mode.
    Grad,
    /// `vjp(F, a₁, …, a_k, u)` for `F : (T₁, …, T_k) → U`, `u : U`: the
    /// vector–Jacobian product `uᵀ·∂F`, shaped as the arguments, by reverse
    /// mode.
    Vjp,
    /// `jvp(F, a₁, …, a_k, d₁, …, d_k)`: `(F(a), ∂F(a)·d)`, by forward mode.
    Jvp,
    /// `jacfwd(F, x)`: the Jacobian, one forward-mode pass per input.
    JacFwd,
    /// `jacrev(F, x)`: the Jacobian, one reverse-mode pass per output.
    JacRev,
    /// `jacobian(F, x)`: the Jacobian by whichever of the two needs fewer
    /// passes for its shape.
    Jacobian,
}

impl Derivative {
    /// Every operator.
    pub const ALL: [Derivative; 6] = [
        Derivative::Grad,
        Derivative::Vjp,
        Derivative::Jvp,
        Derivative::JacFwd,
        Derivative::JacRev,
        Derivative::Jacobian,
    ];

    /// The keyword.
    pub fn name(self) -> &'static str {
        match self {
            Derivative::Grad => "grad",
            Derivative::Vjp => "vjp",
            Derivative::Jvp => "jvp",
            Derivative::JacFwd => "jacfwd",
            Derivative::JacRev => "jacrev",
            Derivative::Jacobian => "jacobian",
        }
    }

    /// The operator of a keyword.
    pub fn from_name(s: &str) -> Option<Derivative> {
        Derivative::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The number of parameters of the function, given the number of
    /// arguments after it (`None` when no arity fits).
    pub fn fn_arity(self, args: usize) -> Option<usize> {
        match self {
            Derivative::Grad => (args >= 1).then_some(args),
            Derivative::Vjp => (args >= 2).then_some(args - 1),
            Derivative::Jvp => (args >= 2 && args.is_multiple_of(2)).then_some(args / 2),
            Derivative::JacFwd | Derivative::JacRev | Derivative::Jacobian => {
                (args == 1).then_some(1)
            }
        }
    }

    /// What the arguments after the function are, for messages.
    pub fn usage(self) -> &'static str {
        match self {
            Derivative::Grad => "`grad(F, a₁, …, a_k)`: a function and its k arguments",
            Derivative::Vjp => {
                "`vjp(F, a₁, …, a_k, u)`: a function, its k arguments and a cotangent of its result"
            }
            Derivative::Jvp => {
                "`jvp(F, a₁, …, a_k, d₁, …, d_k)`: a function, its k arguments and a tangent of each"
            }
            Derivative::JacFwd => "`jacfwd(F, x)`: a function of one argument and the point",
            Derivative::JacRev => "`jacrev(F, x)`: a function of one argument and the point",
            Derivative::Jacobian => "`jacobian(F, x)`: a function of one argument and the point",
        }
    }
}

/// An expression.
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it was written.
    pub span: Span,
}

// Clone, Debug and Drop recurse through `deep::guard`, so they are safe on
// terms of any depth.
impl Clone for Expr {
    fn clone(&self) -> Expr {
        crate::deep::guard(|| Expr {
            kind: self.kind.clone(),
            span: self.span,
        })
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::deep::guard(|| {
            f.debug_struct("Expr")
                .field("kind", &self.kind)
                .field("span", &self.span)
                .finish()
        })
    }
}

/// The forms of [`Expr`].
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A real constant (negative literals are constants, not negations).
    Const(f64),
    /// An integer constant.
    Int(i64),
    /// A literal whole number as written (without a decimal point or an
    /// exponent), before type checking: checking a module makes it an
    /// integer constant where an integer is needed and a real constant
    /// elsewhere (see `types.rs`), so no checked program holds one.
    Literal(i64),
    /// A variable, a size variable, or the name of a definition.
    Var(Name),
    /// A primitive applied to its arguments (`a + b`, `sin(x)`, `a < b`).
    Prim(Prim, Vec<Expr>),
    /// A primitive as a function value: `(+)`, `max`, `exp`.
    PrimFn(Prim),
    /// `let pat [: ty] = value in body`.
    Let {
        /// What it binds.
        pat: Pattern,
        /// Declared type.
        ty: Option<Type>,
        /// The bound expression.
        value: Box<Expr>,
        /// The scope.
        body: Box<Expr>,
    },
    /// `(e1, ..., ek)`, k ≠ 1.
    Tuple(Vec<Expr>),
    /// `e.i` (`fst e` is `e.0`, `snd e` is `e.1`).
    Proj(Box<Expr>, usize),
    /// `[e1, ..., ek]`.
    ArrayLit(Vec<Expr>),
    /// `A[k]`, `k` a constant (negative counts from the end).
    Index(Box<Expr>, i64),
    /// `if cond then e1 else e2`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(x, y. e)` or `fun (x: T, y: T) -> e`.
    Lambda(Vec<Param>, Arc<Expr>),
    /// `f(e1, ..., ek)`: a call of a definition, or of a function value.
    Apply(Box<Expr>, Vec<Expr>),
    /// `map F A`, `reduce F z A`, …: the function, then the other arguments.
    ArrayOp(ArrayOp, Box<Expr>, Vec<Expr>),
    /// `len(A)`, `iota(n)`, `shift1L A`, …
    Builtin(Builtin, Vec<Expr>),
    /// `grad(F, a)`, `jvp(F, a, d)`, …: the operator, the function, then
    /// the other arguments. Source only: expanded before differentiation.
    Derive(Derivative, Box<Expr>, Vec<Expr>),
}

impl Expr {
    /// A node.
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }

    /// A node without a source position.
    pub fn synth(kind: ExprKind) -> Expr {
        Expr {
            kind,
            span: Span::DUMMY,
        }
    }

    /// A structural zero (see [`Span::STRUCTURAL`]).
    pub fn structural_zero() -> Expr {
        Expr {
            kind: ExprKind::Const(0.0),
            span: Span::STRUCTURAL,
        }
    }

    /// Whether this is a structural zero.
    pub fn is_structural_zero(&self) -> bool {
        self.span.is_structural() && matches!(self.kind, ExprKind::Const(c) if c == 0.0)
    }

    /// The children, left to right.
    pub fn children(&self) -> Children<'_> {
        let none: [Option<&Expr>; 3] = [None; 3];
        let empty: &[Expr] = &[];
        let (fixed, rest) = match &self.kind {
            ExprKind::Const(_)
            | ExprKind::Int(_)
            | ExprKind::Literal(_)
            | ExprKind::Var(_)
            | ExprKind::PrimFn(_) => (none, empty),
            ExprKind::Prim(_, args)
            | ExprKind::Tuple(args)
            | ExprKind::ArrayLit(args)
            | ExprKind::Builtin(_, args) => (none, args.as_slice()),
            ExprKind::Let { value, body, .. } => ([Some(&**value), Some(&**body), None], empty),
            ExprKind::Proj(e, _) | ExprKind::Index(e, _) => ([Some(&**e), None, None], empty),
            ExprKind::If(c, t, e) => ([Some(&**c), Some(&**t), Some(&**e)], empty),
            ExprKind::Lambda(_, body) => ([Some(&**body), None, None], empty),
            ExprKind::Apply(f, args)
            | ExprKind::ArrayOp(_, f, args)
            | ExprKind::Derive(_, f, args) => ([Some(&**f), None, None], args.as_slice()),
        };
        Children {
            fixed,
            next: 0,
            rest: rest.iter(),
        }
    }

    /// A copy of this node whose children are `f` of the children (the
    /// children themselves are not copied first). Binders are kept.
    pub fn map_children(&self, f: &mut dyn FnMut(&Expr) -> Expr) -> Expr {
        let mut all = |xs: &[Expr]| xs.iter().map(&mut *f).collect::<Vec<_>>();
        let kind = match &self.kind {
            ExprKind::Const(_)
            | ExprKind::Int(_)
            | ExprKind::Literal(_)
            | ExprKind::Var(_)
            | ExprKind::PrimFn(_) => self.kind.clone(),
            ExprKind::Prim(p, xs) => ExprKind::Prim(*p, all(xs)),
            ExprKind::Tuple(xs) => ExprKind::Tuple(all(xs)),
            ExprKind::ArrayLit(xs) => ExprKind::ArrayLit(all(xs)),
            ExprKind::Builtin(b, xs) => ExprKind::Builtin(*b, all(xs)),
            ExprKind::Let {
                pat,
                ty,
                value,
                body,
            } => ExprKind::Let {
                pat: pat.clone(),
                ty: ty.clone(),
                value: Box::new(f(value)),
                body: Box::new(f(body)),
            },
            ExprKind::Proj(x, k) => ExprKind::Proj(Box::new(f(x)), *k),
            ExprKind::Index(x, k) => ExprKind::Index(Box::new(f(x)), *k),
            ExprKind::If(c, t, e) => ExprKind::If(Box::new(f(c)), Box::new(f(t)), Box::new(f(e))),
            ExprKind::Lambda(ps, body) => ExprKind::Lambda(ps.clone(), Arc::new(f(body))),
            ExprKind::Apply(g, xs) => {
                let g = f(g);
                ExprKind::Apply(Box::new(g), xs.iter().map(&mut *f).collect())
            }
            ExprKind::ArrayOp(op, g, xs) => {
                let g = f(g);
                ExprKind::ArrayOp(*op, Box::new(g), xs.iter().map(&mut *f).collect())
            }
            ExprKind::Derive(d, g, xs) => {
                let g = f(g);
                ExprKind::Derive(*d, Box::new(g), xs.iter().map(&mut *f).collect())
            }
        };
        Expr {
            kind,
            span: self.span,
        }
    }

    /// Structural equality, ignoring spans. Constants compare by bits, so
    /// `nan` equals `nan` and `0` differs from `-0`.
    pub fn same(&self, other: &Expr) -> bool {
        crate::deep::guard(|| self.same_inner(other))
    }

    fn same_inner(&self, other: &Expr) -> bool {
        use ExprKind::*;
        let (a, b) = (&self.kind, &other.kind);
        let all = |xs: &[Expr], ys: &[Expr]| {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| x.same(y))
        };
        match (a, b) {
            (Const(x), Const(y)) => x.to_bits() == y.to_bits(),
            (Int(x), Int(y)) | (Literal(x), Literal(y)) => x == y,
            (Var(x), Var(y)) => x == y,
            (Prim(p, xs), Prim(q, ys)) => p == q && all(xs, ys),
            (PrimFn(p), PrimFn(q)) => p == q,
            (
                Let {
                    pat: p1,
                    ty: t1,
                    value: v1,
                    body: b1,
                },
                Let {
                    pat: p2,
                    ty: t2,
                    value: v2,
                    body: b2,
                },
            ) => p1.same(p2) && t1 == t2 && v1.same(v2) && b1.same(b2),
            (Tuple(xs), Tuple(ys)) | (ArrayLit(xs), ArrayLit(ys)) => all(xs, ys),
            (Proj(x, i), Proj(y, j)) => i == j && x.same(y),
            (Index(x, i), Index(y, j)) => i == j && x.same(y),
            (If(c1, t1, e1), If(c2, t2, e2)) => c1.same(c2) && t1.same(t2) && e1.same(e2),
            (Lambda(ps, b1), Lambda(qs, b2)) => {
                ps.len() == qs.len()
                    && ps
                        .iter()
                        .zip(qs)
                        .all(|(p, q)| p.pat.same(&q.pat) && p.ty == q.ty)
                    && b1.same(b2)
            }
            (Apply(f, xs), Apply(g, ys)) => f.same(g) && all(xs, ys),
            (ArrayOp(o1, f, xs), ArrayOp(o2, g, ys)) => o1 == o2 && f.same(g) && all(xs, ys),
            (Derive(d1, f, xs), Derive(d2, g, ys)) => d1 == d2 && f.same(g) && all(xs, ys),
            (Builtin(b1, xs), Builtin(b2, ys)) => b1 == b2 && all(xs, ys),
            _ => false,
        }
    }
}

impl Drop for Expr {
    fn drop(&mut self) {
        // Children are dropped inside the guard, so dropping a very deep tree
        // cannot overflow the native stack.
        let has_children = !matches!(
            self.kind,
            ExprKind::Const(_)
                | ExprKind::Int(_)
                | ExprKind::Literal(_)
                | ExprKind::Var(_)
                | ExprKind::PrimFn(_)
        );
        if has_children {
            let kind = std::mem::replace(&mut self.kind, ExprKind::Const(0.0));
            crate::deep::guard(move || drop(kind));
        }
    }
}

/// A parameter of a definition.
#[derive(Clone, Debug)]
pub struct DefParam {
    /// Its name.
    pub name: Name,
    /// Where it was declared.
    pub span: Span,
    /// Its type, or `None` for a size parameter (`s: size`).
    pub ty: Option<Type>,
}

/// `def name(params) -> ret = body`.
#[derive(Clone, Debug)]
pub struct Def {
    /// The function's name.
    pub name: Name,
    /// Where the name was written.
    pub name_span: Span,
    /// Parameters.
    pub params: Vec<DefParam>,
    /// The declared result type.
    pub ret: Option<Type>,
    /// The body.
    pub body: Expr,
}

impl Def {
    /// Equality ignoring spans.
    pub fn same(&self, other: &Def) -> bool {
        self.name == other.name
            && self.params.len() == other.params.len()
            && self
                .params
                .iter()
                .zip(&other.params)
                .all(|(a, b)| a.name == b.name && a.ty == b.ty)
            && self.ret == other.ret
            && self.body.same(&other.body)
    }
}

/// A parsed file: definitions in order.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// The definitions; each may call only those before it.
    pub defs: Vec<Def>,
}

impl Module {
    /// Equality ignoring spans.
    pub fn same(&self, other: &Module) -> bool {
        self.defs.len() == other.defs.len()
            && self.defs.iter().zip(&other.defs).all(|(a, b)| a.same(b))
    }

    /// The definition called `name`.
    pub fn def(&self, name: &str) -> Option<&Def> {
        self.defs.iter().find(|d| &*d.name == name)
    }
}

/// The direct subterms of an expression, in order ([`Expr::children`]),
/// without allocating: at most three held one by one, then a slice.
#[derive(Clone, Debug)]
pub struct Children<'a> {
    fixed: [Option<&'a Expr>; 3],
    next: usize,
    rest: std::slice::Iter<'a, Expr>,
}

impl<'a> Iterator for Children<'a> {
    type Item = &'a Expr;

    fn next(&mut self) -> Option<&'a Expr> {
        while self.next < self.fixed.len() {
            let at = self.next;
            self.next += 1;
            if let Some(e) = self.fixed[at] {
                return Some(e);
            }
        }
        self.rest.next()
    }
}
