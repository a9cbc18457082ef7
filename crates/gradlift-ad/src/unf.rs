//! Source UNF (Figure 6) and the transformation UNF (Figure 9):
//! Source → Source UNF.
//!
//! A UNF term is a sequence of primitives acting on a stack of values.
//! `T₁ ⊢ e : T₂` means `e` maps a stack of types `T₁` to one of types `T₂`;
//! every primitive keeps its arguments on the stack and pushes its result.
//! Invariant (Lemma 4.4): if `x₁:A₁,…,x_k:A_k ⊢ e : B` then
//! `A₁,…,A_k ⊢ UNF(e) : A₁,…,A_k,B` — the term returns its context plus its
//! value.
//!
//! The primitives, with `d` the depth of the stack they act on:
//!
//! | primitive | Figure 6 | stack effect |
//! | --- | --- | --- |
//! | `var_{d;i}` | `var_{T;i}` | `T ⊢ T, Tᵢ` |
//! | `op_{d;m}` | `op_{T;m}`, `pair`, `πᵢ`, `map2`, `reduce` | `T, A₁…A_m ⊢ T, A₁…A_m, B` |
//! | `proj_{a;b;c}` | `proj_{T₁;T₂;T₃}` | `T₁, T₂, T₃ ⊢ T₁, T₃` with `|Tᵢ|` = a, b, c |
//! | `name_x` | — | names the top entry `x` (the identity) |
//!
//! `op` is one primitive form for every construct that computes a value
//! from the top `m` entries: a scalar primitive, an n-tuple (Figure 6's
//! `pair` for n = 2), a projection (πᵢ as a unary op, as §4 reads it), an
//! array literal, indexing, the built-ins, and the array operations, whose
//! function argument is a Source term referring to the context by name, as
//! in Figure 9 (`map2_{T;x,y.e}`). `if` is an `op` with no stack arguments
//! whose condition and branches are Source terms (§7.2 keeps conditions
//! outside differentiation); a constant is an `op` with none (`c_{T;0}`).
//!
//! Departures from the figures, and why:
//! - Stack types are not stored in each primitive (that makes a term of n
//!   bindings O(n²) in size); a primitive stores the depth `d` it acts on,
//!   and the types follow from the context by running the stack. The
//!   printed form shows the depths, and [`parse_unf`] reads it back.
//! - `name_x`: map and reduce bodies refer to the context by name
//!   (Figure 9), so the entry a `let` binds must carry its name for the
//!   bodies below it. The paper's contexts are the parameters only.
//! - Weakening (§4.4, corrected as erratum E1: insert A at depth |Γ| and
//!   shift the indices above it) is what UNF(e₂) needs in `⟨e₁, e₂⟩` and
//!   `e₁ op e₂`. Compiling e₂ directly on the stack `Γ, A` produces exactly
//!   `W_A(UNF_Γ(e₂))`, in linear rather than quadratic time; [`weaken`]
//!   implements W itself, and a test checks the two agree.
//! - The unit of `reduce` and the initial value of `foldl` and the scans are
//!   stack arguments (Appendix A.3's foldl), not a Source term inside the
//!   primitive as Figure 9 keeps reduce's unit: one rule then serves all
//!   folds, and the cotangent of a unit that depends on the context (the
//!   case erratum E2 corrects) comes out of the transpose directly.
//! - Fig 9's reduce ends with `proj_{Γ;A[R]ⁿ;R}` (erratum E7).

use gradlift_lang::deep::guard;
use gradlift_lang::scope::Scope;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;
use std::fmt;

/// Whether `p` is an integer operation or comparison (written `Z+`, `Z<`
/// in UNF text, apart from the real ones of the same name).
fn is_integer(p: Prim) -> bool {
    use gradlift_lang::prim::PrimKind;
    matches!(p.info().kind(), PrimKind::Int | PrimKind::IntCompare)
}

/// What an `op` computes from its `m` stack arguments.
#[derive(Clone, Debug)]
pub enum OpKind {
    /// A constant (`m = 0`).
    Const(f64),
    /// An integer constant (`m = 0`).
    Int(i64),
    /// A scalar primitive.
    Prim(Prim),
    /// An m-tuple.
    Tuple,
    /// Component `k` of a tuple (`m = 1`).
    Component(usize),
    /// An array literal of `m` elements.
    ArrayLit,
    /// `A[k]` (`m = 1`).
    Index(i64),
    /// A built-in; size arguments (of `iota`, `replicate`, `take`, `drop`)
    /// are Source size expressions kept in the primitive.
    Builtin(Builtin, Vec<Expr>),
    /// An array operation with its function as a Source lambda: parameter
    /// names and body.
    ArrayOp(ArrayOp, Vec<Name>, Expr),
    /// `if c then e₁ else e₂` with Source condition and branches (`m = 0`).
    If(Expr, Expr, Expr),
    /// A size variable's value as a real (`m = 0`; sizes are not
    /// differentiated).
    Size(Name),
}

/// A primitive of Source UNF.
#[derive(Clone, Debug)]
pub enum UnfPrim {
    /// `var_{d;i}`: pushes a copy of entry `i` (from 0) of a stack of depth `d`.
    Var {
        /// Stack depth.
        depth: usize,
        /// The entry copied.
        index: usize,
    },
    /// `op_{d;m}`: computes from the top `arity` entries, pushes the result.
    Op {
        /// Stack depth (arguments included).
        depth: usize,
        /// Number of stack arguments.
        arity: usize,
        /// What it computes.
        kind: Box<OpKind>,
    },
    /// `proj_{keep;drop;top}`: forgets the `drop` entries below the top `top`.
    Proj {
        /// Entries kept at the bottom.
        keep: usize,
        /// Entries forgotten.
        drop: usize,
        /// Entries kept at the top.
        top: usize,
    },
    /// Names the top entry.
    Name(Name),
}

/// A Source UNF term over a context.
#[derive(Clone, Debug)]
pub struct Unf {
    /// The context: names and types of the initial stack.
    pub context: Vec<(Name, Type)>,
    /// Size variables in scope (not on the stack).
    pub size_vars: Vec<Name>,
    /// The primitives, in order (`e₁; e₂; …`).
    pub prims: Vec<UnfPrim>,
}

/// Figure 9: the UNF of `body` over the context `context`.
pub fn unf(context: &[(Name, Type)], size_vars: &[Name], body: &Expr) -> Unf {
    let mut c = Compiler {
        prims: Vec::new(),
        names: Scope::new(),
        depth: 0,
    };
    for (n, _) in context {
        c.names.push(n.clone(), c.depth);
        c.depth += 1;
    }
    c.expr(body);
    Unf {
        context: context.to_vec(),
        size_vars: size_vars.to_vec(),
        prims: c.prims,
    }
}

struct Compiler {
    prims: Vec<UnfPrim>,
    /// Named entries: name → position on the stack.
    names: Scope<usize>,
    depth: usize,
}

impl Compiler {
    fn op(&mut self, arity: usize, kind: OpKind) {
        self.prims.push(UnfPrim::Op {
            depth: self.depth,
            arity,
            kind: Box::new(kind),
        });
        self.depth += 1;
        // Hide the arguments: proj_{Γ; A₁…A_m; B}.
        if arity > 0 {
            self.proj(self.depth - 1 - arity, arity, 1);
        }
    }

    fn proj(&mut self, keep: usize, drop: usize, top: usize) {
        self.prims.push(UnfPrim::Proj { keep, drop, top });
        self.depth -= drop;
    }

    /// Compiles each argument in turn (each on the stack left by the ones
    /// before: the weakening of §4.4) and applies `kind`.
    fn args_then(&mut self, args: &[Expr], kind: OpKind) {
        for a in args {
            self.expr(a);
        }
        self.op(args.len(), kind);
    }

    fn expr(&mut self, e: &Expr) {
        guard(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Const(c) => self.op(0, OpKind::Const(*c)),
            ExprKind::Int(k) | ExprKind::Literal(k) => self.op(0, OpKind::Int(*k)),
            ExprKind::Var(n) => match self.names.get(n) {
                Some(&index) => {
                    self.prims.push(UnfPrim::Var {
                        depth: self.depth,
                        index,
                    });
                    self.depth += 1;
                }
                // A size variable: its value as a real.
                None => self.op(0, OpKind::Size(n.clone())),
            },
            ExprKind::Let { .. } => self.let_chain(e),
            ExprKind::Prim(p, args) => self.args_then(args, OpKind::Prim(*p)),
            ExprKind::Tuple(es) => self.args_then(es, OpKind::Tuple),
            ExprKind::Proj(x, k) => self.args_then(std::slice::from_ref(x), OpKind::Component(*k)),
            ExprKind::ArrayLit(es) => self.args_then(es, OpKind::ArrayLit),
            ExprKind::Index(x, k) => self.args_then(std::slice::from_ref(x), OpKind::Index(*k)),
            ExprKind::Builtin(b, args) => {
                let (sizes, rest) = if b.size_first() {
                    args.split_at(1)
                } else {
                    args.split_at(0)
                };
                self.args_then(rest, OpKind::Builtin(*b, sizes.to_vec()))
            }
            ExprKind::If(c, t, f) => {
                self.op(0, OpKind::If((**c).clone(), (**t).clone(), (**f).clone()))
            }
            ExprKind::ArrayOp(op, f, args) => {
                let ExprKind::Lambda(params, body) = &f.kind else {
                    unreachable!("inlining makes every function argument a lambda")
                };
                let (names, body) = plain_params(params, body);
                self.args_then(args, OpKind::ArrayOp(*op, names, body))
            }
            ExprKind::Lambda(..)
            | ExprKind::PrimFn(_)
            | ExprKind::Apply(..)
            | ExprKind::Derive(..) => {
                unreachable!("the UNF route receives first-order, expanded Source terms")
            }
        }
    }

    /// `UNF(let x = e₁ in e₂) = UNF(e₁); name_x; UNF(e₂); proj_{Γ;A;B}`.
    fn let_chain(&mut self, mut e: &Expr) {
        let mark = self.names.mark();
        let mut pending = Vec::new();
        while let ExprKind::Let {
            pat, value, body, ..
        } = &e.kind
        {
            let base = self.depth;
            self.expr(value);
            self.bind(pat);
            pending.push(base);
            e = body;
        }
        self.expr(e);
        self.names.pop_to(mark);
        while let Some(base) = pending.pop() {
            let bound = self.depth - 1 - base;
            self.proj(base, bound, 1);
        }
    }

    /// Names the top entry by `pat`; a tuple pattern pushes its components.
    fn bind(&mut self, pat: &Pattern) {
        match pat {
            Pattern::Var(n, _) => {
                self.prims.push(UnfPrim::Name(n.clone()));
                self.names.push(n.clone(), self.depth - 1);
            }
            Pattern::Wild(_) => {}
            Pattern::Tuple(ps, _) => {
                let tuple_at = self.depth - 1;
                for (k, p) in ps.iter().enumerate() {
                    self.prims.push(UnfPrim::Var {
                        depth: self.depth,
                        index: tuple_at,
                    });
                    self.depth += 1;
                    self.op(1, OpKind::Component(k));
                    self.bind(p);
                }
            }
        }
    }
}

/// Lambda parameters as plain names, tuple patterns bound in the body.
pub(crate) fn plain_params(params: &[Param], body: &Expr) -> (Vec<Name>, Expr) {
    let mut names = Vec::new();
    let mut body = body.clone();
    for (i, p) in params.iter().enumerate().rev() {
        match &p.pat {
            Pattern::Var(n, _) => names.push(n.clone()),
            pat => {
                let n = Name::from(format!("param{i}'"));
                body =
                    gradlift_lang::build::let_in(pat.clone(), gradlift_lang::build::var(&n), body);
                names.push(n);
            }
        }
    }
    names.reverse();
    (names, body)
}

/// The weakening W_A of §4.4 with erratum E1: inserts an anonymous entry
/// at depth `at` (= |Γ|) under every primitive of `prims`, shifting the
/// indices of entries above it.
pub fn weaken(prims: &[UnfPrim], at: usize) -> Vec<UnfPrim> {
    prims
        .iter()
        .map(|p| match p {
            UnfPrim::Var { depth, index } => UnfPrim::Var {
                depth: depth + 1,
                index: if *index >= at { index + 1 } else { *index },
            },
            UnfPrim::Op { depth, arity, kind } => UnfPrim::Op {
                depth: depth + 1,
                arity: *arity,
                kind: kind.clone(),
            },
            UnfPrim::Proj { keep, drop, top } => UnfPrim::Proj {
                keep: keep + 1,
                drop: *drop,
                top: *top,
            },
            UnfPrim::Name(n) => UnfPrim::Name(n.clone()),
        })
        .collect()
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpKind::Const(c) => write!(f, "{}", gradlift_lang::printer::format_real(*c)),
            OpKind::Int(k) => write!(f, "{k}"),
            // `Z+`: the integer form, which shares its name with the real one.
            OpKind::Prim(p) if is_integer(*p) => write!(f, "Z{}", p.info().name),
            OpKind::Prim(p) => write!(f, "{}", p.info().name),
            OpKind::Tuple => f.write_str("tuple"),
            OpKind::Component(k) => write!(f, "π{k}"),
            OpKind::ArrayLit => f.write_str("array"),
            OpKind::Index(k) => write!(f, "index[{k}]"),
            OpKind::Builtin(Builtin::ReduceByIndex(p), _) => {
                write!(f, "reduce_by_index[{}]", p.info().name)
            }
            OpKind::Builtin(b, sizes) => {
                write!(f, "{}", b.name())?;
                for s in sizes {
                    write!(f, "({s})")?;
                }
                Ok(())
            }
            OpKind::ArrayOp(op, params, body) => {
                write!(f, "{}", op.name())?;
                if let Some(schedule) = op.schedule() {
                    write!(f, "[{schedule}]")?;
                }
                write!(f, "({}. {body})", params.join(", "))
            }
            OpKind::If(c, t, e) => write!(f, "if {c} then {t} else {e}"),
            OpKind::Size(n) => write!(f, "size {n}"),
        }
    }
}

impl fmt::Display for UnfPrim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnfPrim::Var { depth, index } => write!(f, "var_{{{depth};{}}}", index + 1),
            UnfPrim::Op { depth, arity, kind } => write!(f, "op_{{{depth};{arity}}}[{kind}]"),
            UnfPrim::Proj { keep, drop, top } => write!(f, "proj_{{{keep};{drop};{top}}}"),
            UnfPrim::Name(n) => write!(f, "name_{{{n}}}"),
        }
    }
}

impl Unf {
    /// The text form with every primitive prefixed by `prefix` (the
    /// Target UNF form prefixes `F `).
    pub(crate) fn write_with(&self, f: &mut fmt::Formatter<'_>, prefix: &str) -> fmt::Result {
        let params: Vec<String> = self
            .context
            .iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect();
        writeln!(f, "# context: ({})", params.join(", "))?;
        if !self.size_vars.is_empty() {
            writeln!(f, "# sizes: {}", self.size_vars.join(", "))?;
        }
        for (i, p) in self.prims.iter().enumerate() {
            if i > 0 {
                f.write_str(";\n")?;
            }
            write!(f, "{prefix}{p}")?;
        }
        f.write_str("\n")
    }
}

impl fmt::Display for Unf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_with(f, "")
    }
}

/// Text that is not a UNF term.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct UnfParseError {
    /// 1-based line of the primitive at fault.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads the text form of a UNF term back. Primitives start at the
/// beginning of a line (`var_{`, `op_{`, `proj_{`, `name_{`) and may continue
/// on further lines (a lambda body); `prefix` is stripped from each.
pub fn parse_unf_with(text: &str, prefix: &str) -> Result<Unf, UnfParseError> {
    let err = |line: usize, message: String| UnfParseError { line, message };
    let mut context = Vec::new();
    let mut size_vars = Vec::new();
    let mut chunks: Vec<(usize, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if let Some(ctx) = raw.strip_prefix("# context:") {
            let module = gradlift_lang::parse_module(&format!("def context{} = 0", ctx.trim()))
                .map_err(|e| err(line, format!("the context: {e}")))?;
            for p in &module.defs[0].params {
                let ty =
                    p.ty.clone()
                        .ok_or_else(|| err(line, "a context entry needs a type".into()))?;
                context.push((p.name.clone(), ty));
            }
            continue;
        }
        if let Some(sizes) = raw.strip_prefix("# sizes:") {
            size_vars.extend(sizes.split(',').map(|s| Name::from(s.trim())));
            continue;
        }
        let body = raw.strip_prefix(prefix).unwrap_or(raw);
        let starts = ["var_{", "op_{", "proj_{", "name_{"]
            .iter()
            .any(|p| body.starts_with(p));
        if starts && raw.starts_with(prefix) {
            chunks.push((line, body.to_string()));
        } else if let Some((_, last)) = chunks.last_mut() {
            last.push('\n');
            last.push_str(raw);
        } else if !raw.trim().is_empty() && !raw.starts_with('#') {
            return Err(err(line, format!("expected a primitive, found `{raw}`")));
        }
    }
    let mut prims = Vec::new();
    for (line, chunk) in chunks {
        let chunk = chunk.trim_end().trim_end_matches(';');
        prims.push(parse_prim(chunk).map_err(|m| err(line, m))?);
    }
    Ok(Unf {
        context,
        size_vars,
        prims,
    })
}

/// [`parse_unf_with`] without a prefix: the inverse of `Display` for [`Unf`].
pub fn parse_unf(text: &str) -> Result<Unf, UnfParseError> {
    parse_unf_with(text, "")
}

fn numbers(inner: &str, n: usize) -> Result<Vec<usize>, String> {
    let xs: Vec<usize> = inner
        .split(';')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{x}` is not a number"))
        })
        .collect::<Result<_, _>>()?;
    if xs.len() != n {
        return Err(format!("expected {n} numbers, found `{inner}`"));
    }
    Ok(xs)
}

fn parse_prim(chunk: &str) -> Result<UnfPrim, String> {
    let brace = |head: &str| -> Result<(String, String), String> {
        let rest = &chunk[head.len()..];
        let close = rest.find('}').ok_or("a missing `}`")?;
        Ok((rest[..close].to_string(), rest[close + 1..].to_string()))
    };
    if chunk.starts_with("var_{") {
        let (inner, _) = brace("var_{")?;
        let xs = numbers(&inner, 2)?;
        if xs[1] == 0 || xs[1] > xs[0] {
            return Err(format!("`var_{{{inner}}}` names no entry of the stack"));
        }
        return Ok(UnfPrim::Var {
            depth: xs[0],
            index: xs[1] - 1,
        });
    }
    if chunk.starts_with("proj_{") {
        let (inner, _) = brace("proj_{")?;
        let xs = numbers(&inner, 3)?;
        return Ok(UnfPrim::Proj {
            keep: xs[0],
            drop: xs[1],
            top: xs[2],
        });
    }
    if chunk.starts_with("name_{") {
        let (inner, _) = brace("name_{")?;
        return Ok(UnfPrim::Name(Name::from(inner.trim())));
    }
    if chunk.starts_with("op_{") {
        let (inner, rest) = brace("op_{")?;
        let xs = numbers(&inner, 2)?;
        let kind = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or("an `op` needs its kind in brackets")?;
        return Ok(UnfPrim::Op {
            depth: xs[0],
            arity: xs[1],
            kind: Box::new(parse_kind(kind.trim())?),
        });
    }
    Err(format!("expected a primitive, found `{chunk}`"))
}

fn parse_kind(kind: &str) -> Result<OpKind, String> {
    let expr = |t: &str| gradlift_lang::parse_expr(t).map_err(|e| format!("`{t}`: {e}"));
    let word_end = kind
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(kind.len());
    let (word, rest) = kind.split_at(word_end);
    if let Some(k) = kind.strip_prefix('π') {
        return k
            .parse()
            .map(OpKind::Component)
            .map_err(|_| format!("`{kind}`"));
    }
    if let Some(k) = kind
        .strip_prefix("index[")
        .and_then(|k| k.strip_suffix(']'))
    {
        return k
            .parse()
            .map(OpKind::Index)
            .map_err(|_| format!("`{kind}`"));
    }
    if let Some(op) = kind
        .strip_prefix("reduce_by_index[")
        .and_then(|k| k.strip_suffix(']'))
    {
        return [Prim::Add, Prim::Mul, Prim::Min, Prim::Max]
            .into_iter()
            .find(|p| p.info().name == op)
            .map(|p| OpKind::Builtin(Builtin::ReduceByIndex(p), vec![]))
            .ok_or_else(|| format!("`{kind}`: not an operator of `reduce_by_index`"));
    }
    if let Some(n) = kind.strip_prefix("size ") {
        return Ok(OpKind::Size(Name::from(n.trim())));
    }
    match word {
        "tuple" if rest.is_empty() => return Ok(OpKind::Tuple),
        "array" if rest.is_empty() => return Ok(OpKind::ArrayLit),
        "if" => {
            return match &expr(kind)?.kind {
                ExprKind::If(c, t, e) => {
                    Ok(OpKind::If((**c).clone(), (**t).clone(), (**e).clone()))
                }
                _ => Err(format!("`{kind}` is not a conditional")),
            }
        }
        _ => {}
    }
    let array_ops = [
        ArrayOp::Map,
        ArrayOp::Map2,
        ArrayOp::Reduce,
        ArrayOp::FOLDL,
        ArrayOp::Scanl,
        ArrayOp::Scanr,
        ArrayOp::While,
    ];
    if let Some(mut op) = array_ops.into_iter().find(|op| op.name() == word) {
        let mut rest = rest;
        if let (ArrayOp::Foldl(_), Some(bracketed)) = (op, rest.strip_prefix('[')) {
            let (schedule, after) = bracketed
                .split_once(']')
                .ok_or("a checkpoint schedule needs its closing `]`")?;
            op = ArrayOp::Foldl(Some(gradlift_lang::Schedule::parse(schedule)?));
            rest = after;
        }
        let lambda = expr(rest)?;
        let ExprKind::Lambda(params, body) = &lambda.kind else {
            return Err(format!("`{word}` needs a lambda, found `{rest}`"));
        };
        let (names, body) = plain_params(params, body);
        return Ok(OpKind::ArrayOp(op, names, body));
    }
    let builtins = [
        Builtin::Len,
        Builtin::Iota,
        Builtin::Replicate,
        Builtin::Concat,
        Builtin::Take,
        Builtin::Drop,
        Builtin::Shift1L,
        Builtin::Shift1R,
        Builtin::Get,
        Builtin::Gather,
        Builtin::Transpose,
        Builtin::MatMul,
    ];
    if let Some(b) = builtins.into_iter().find(|b| b.name() == word) {
        let sizes = if rest.trim().is_empty() {
            vec![]
        } else {
            vec![expr(rest)?]
        };
        return Ok(OpKind::Builtin(b, sizes));
    }
    if let Some(name) = kind.strip_prefix('Z') {
        if let Some(p) = Prim::ALL
            .into_iter()
            .find(|p| is_integer(*p) && p.info().name == name)
        {
            return Ok(OpKind::Prim(p));
        }
    }
    if let Some(p) = Prim::ALL.into_iter().find(|p| p.info().name == kind) {
        return Ok(OpKind::Prim(p));
    }
    match expr(kind)?.kind {
        ExprKind::Const(c) => Ok(OpKind::Const(c)),
        ExprKind::Literal(k) => Ok(OpKind::Int(k)),
        _ => Err(format!("`{kind}` is not an operation")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gradlift_lang::parse_expr;

    fn ctx(names: &[&str]) -> Vec<(Name, Type)> {
        names.iter().map(|n| (Name::from(*n), Type::Real)).collect()
    }

    /// Runs the stack discipline: the depth each primitive declares is the
    /// depth it meets, and the term leaves its context plus one value
    /// (Lemma 4.4).
    fn check_depths(u: &Unf) {
        let mut depth = u.context.len();
        for p in &u.prims {
            match p {
                UnfPrim::Var { depth: d, index } => {
                    assert_eq!(*d, depth, "{p}");
                    assert!(*index < depth, "{p}");
                    depth += 1;
                }
                UnfPrim::Op {
                    depth: d, arity, ..
                } => {
                    assert_eq!(*d, depth, "{p}");
                    assert!(*arity <= depth, "{p}");
                    depth += 1;
                }
                UnfPrim::Proj { keep, drop, top } => {
                    assert_eq!(keep + drop + top, depth, "{p}");
                    depth -= drop;
                }
                UnfPrim::Name(_) => {}
            }
        }
        assert_eq!(depth, u.context.len() + 1);
    }

    #[test]
    fn example_4_1_shape() {
        // x₁,x₂,x₃ ⊢ x₁ + cos x₂: var; var; cos; proj; +; proj.
        let u = unf(
            &ctx(&["x1", "x2", "x3"]),
            &[],
            &parse_expr("x1 + cos(x2)").unwrap(),
        );
        let printed: Vec<String> = u.prims.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            printed,
            [
                "var_{3;1}",
                "var_{4;2}",
                "op_{5;1}[cos]",
                "proj_{4;1;1}",
                "op_{5;2}[+]",
                "proj_{3;2;1}"
            ]
        );
        check_depths(&u);
    }

    #[test]
    fn lets_and_tuples_keep_the_stack_discipline() {
        for text in [
            "let w1 = x1 * x2 in let w2 = w1 * x1 in w2",
            "let p = (x1 * x2, sin(x3)) in p.0 * p.1",
            "let (a, b) = (x1, x2) in a * (let v = b * b in v + a)",
            "reduce (a, b. a + b) 0 (map (a. a * x1) [x2, x3])",
            "if x1 > 0 then x2 else x3 * x1",
        ] {
            let u = unf(&ctx(&["x1", "x2", "x3"]), &[], &parse_expr(text).unwrap());
            check_depths(&u);
        }
    }

    /// Compiling e₂ on the stack Γ, A is the weakening W_A of UNF_Γ(e₂)
    /// (§4.4 with erratum E1).
    #[test]
    fn weakening_inserts_at_the_depth_of_the_context() {
        let gamma = ctx(&["x1", "x2"]);
        for text in [
            "x1 * (let w = sin(x2) in w + x1)",
            "let p = (x1, x2) in p.0 * p.1",
            "x2",
        ] {
            let e = parse_expr(text).unwrap();
            let plain = unf(&gamma, &[], &e);
            let weakened = weaken(&plain.prims, gamma.len());
            // The same term compiled with an anonymous entry above Γ.
            let mut c = Compiler {
                prims: Vec::new(),
                names: Scope::new(),
                depth: 0,
            };
            for (n, _) in &gamma {
                c.names.push(n.clone(), c.depth);
                c.depth += 1;
            }
            c.depth += 1; // the anonymous A
            c.expr(&e);
            let a: Vec<String> = weakened.iter().map(|p| p.to_string()).collect();
            let b: Vec<String> = c.prims.iter().map(|p| p.to_string()).collect();
            assert_eq!(a, b, "{text}");
        }
    }
}
