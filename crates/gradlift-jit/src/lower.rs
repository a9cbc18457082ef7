//! Lowering (STYLE 13): a first-order closed term → one Cranelift function.
//!
//! Input: a [`Closed`] term (every function argument of an array operation
//! a lambda, binders unique, only the parameters and size variables free).
//! Output: a function of the [`crate::abi`] signature whose value is the
//! term's. One translator, [`Translator::lower`], maps a term to its
//! [`Values`]: `let`-bound values stay SSA values, tuples are flattened, `if`
//! becomes a merge block with parameters, array operations become loops
//! (`arrays.rs`) whose only Cranelift `Variable`s are the loop-carried state
//! (the index, the accumulator, the workspace's bump pointer).
//!
//! Every run-time size is checked before memory is touched; a failed check
//! jumps to the function's one failure block, which stores a detail in
//! `*info` and returns the [`Status`]. Constructs not lowered yet are a
//! named [`JitError::Unsupported`], never a panic.

use crate::abi::{Status, MAX_LEN};
use crate::prims::{lower_prim, Libm, REAL};
use crate::values::{load, ArrayVal, Shape, Values};
use crate::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, BlockArg, FuncRef, InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};
use gradlift_ad::inline::Closed;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::{Expr, ExprKind, Name, Pattern, Size, Type};
use gradlift_lang::types::Typer;
use std::collections::HashMap;

/// The state of lowering one function.
pub(crate) struct Translator<'a, 'f> {
    pub b: &'a mut FunctionBuilder<'f>,
    /// Values of the variables in scope (binders are unique).
    pub env: HashMap<Name, Values>,
    /// Size variables, as `i64`.
    pub sizes: HashMap<Name, Value>,
    /// Types of the variables in scope, for the layouts of loop results.
    pub typer: Typer,
    /// The workspace's bump pointer (an address).
    pub top: Variable,
    /// The workspace's base and end addresses.
    pub base: Value,
    pub end: Value,
    /// The failure block: parameters `(status, info)`.
    pub fail: Block,
    /// The imported shims, by [`Libm`] order.
    pub libm: Vec<FuncRef>,
    /// The imported schedule functions of checkpointed loops (start,
    /// next), where the code runs in this process.
    pub runtime: crate::checkpoint::Runtime,
}

pub(crate) fn unsupported<T>(what: impl Into<String>) -> Result<T, JitError> {
    Err(JitError::Unsupported(what.into()))
}

/// Lowers `closed` into the function `b` builds (its signature already set
/// to the ABI's, `libm` imported into it).
pub(crate) fn lower_function(
    b: &mut FunctionBuilder,
    closed: &Closed,
    libm: Vec<FuncRef>,
    runtime: crate::checkpoint::Runtime,
) -> Result<(), JitError> {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (args, out, out_len, ws, ws_len, info) = (
        params[0], params[1], params[2], params[3], params[4], params[5],
    );
    let fail = b.create_block();
    b.set_cold_block(fail);
    let top = b.declare_var(types::I64);
    b.def_var(top, ws);
    let zero = b.ins().iconst(types::I64, 0);
    let ws_len = b.ins().smax(ws_len, zero);
    let end = b.ins().iadd(ws, ws_len);
    let mut t = Translator {
        b,
        env: HashMap::new(),
        sizes: HashMap::new(),
        typer: Typer::new(&closed.size_vars),
        top,
        base: ws,
        end,
        fail,
        libm,
        runtime,
    };
    for (k, name) in closed.size_vars.iter().enumerate() {
        let v =
            t.b.ins()
                .load(types::I64, crate::values::mem(), args, 8 * k as i32);
        let index = t.b.ins().iconst(types::I64, k as i64);
        t.check_size(v, index);
        t.sizes.insert(name.clone(), v);
    }
    let mut word = closed.size_vars.len() as i32;
    for (name, ty) in &closed.params {
        let Some(ty) = ty else { continue };
        let ptr =
            t.b.ins()
                .load(types::I64, crate::values::mem(), args, 8 * word);
        word += 1;
        let shape = t.shape_of_type(ty, true)?;
        t.bytes(&shape)?;
        let v = load(t.b, ptr, &shape);
        t.env.insert(name.clone(), v);
        t.typer.push(name.clone(), ty.clone());
    }
    let result = t.lower(&closed.body)?;
    let Some(shape) = result.shape() else {
        return unsupported("a condition as the result");
    };
    let bytes = t.bytes(&shape)?;
    let needed = t.b.ins().ushr_imm_s(bytes, 3);
    let fits =
        t.b.ins()
            .icmp(IntCC::SignedLessThanOrEqual, needed, out_len);
    t.check(fits, Status::OutputTooSmall, needed);
    t.store(out, &result, &shape)?;
    let ok = t.b.ins().iconst(types::I64, Status::Ok as i64);
    t.b.ins().return_(&[ok]);
    t.b.switch_to_block(fail);
    let status = t.b.append_block_param(fail, types::I64);
    let detail = t.b.append_block_param(fail, types::I64);
    t.b.ins().store(crate::values::mem(), detail, info, 0);
    t.b.ins().return_(&[status]);
    t.b.seal_all_blocks();
    Ok(())
}

impl Translator<'_, '_> {
    /// Continues if `ok` (an `i8`) is set; otherwise fails with `status`.
    pub fn check(&mut self, ok: Value, status: Status, info: Value) {
        let cont = self.b.create_block();
        let code = self.b.ins().iconst(types::I64, status as i64);
        let args = [BlockArg::from(code), BlockArg::from(info)];
        self.b.ins().brif(ok, cont, &[], self.fail, &args);
        self.b.switch_to_block(cont);
    }

    /// Checks `0 ≤ n ≤ MAX_LEN`.
    pub fn check_size(&mut self, n: Value, info: Value) {
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, n, MAX_LEN);
        self.check(ok, Status::BadSize, info);
    }

    /// `a · b` for `a, b ≥ 0`, failing with `SizeOverflow` past 2⁶³.
    pub fn mul_checked(&mut self, a: Value, b: Value) -> Value {
        let high = self.b.ins().umulhi(a, b);
        let low = self.b.ins().imul(a, b);
        let high_zero = self.b.ins().icmp_imm_s(IntCC::Equal, high, 0);
        let low_fits = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, low, 0);
        let ok = self.b.ins().band(high_zero, low_fits);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.check(ok, Status::SizeOverflow, zero);
        low
    }

    /// Bytes one element of `shape` takes, overflow checked.
    pub fn bytes(&mut self, shape: &Shape) -> Result<Value, JitError> {
        Ok(match shape {
            Shape::Real => self.b.ins().iconst(types::I64, 8),
            Shape::Tuple(ss) => {
                let mut total = self.b.ins().iconst(types::I64, 0);
                for s in ss {
                    let k = self.bytes(s)?;
                    // Each part is below 2⁶³, so the sum fits in 64 bits unsigned.
                    total = self.b.ins().iadd(total, k);
                    let ok = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, total, 0);
                    let zero = self.b.ins().iconst(types::I64, 0);
                    self.check(ok, Status::SizeOverflow, zero);
                }
                total
            }
            Shape::Array(len, elem) => {
                let k = self.bytes(elem)?;
                self.mul_checked(*len, k)
            }
        })
    }

    /// Takes `bytes` from the workspace.
    pub fn alloc(&mut self, bytes: Value) -> Value {
        let top = self.b.use_var(self.top);
        let available = self.b.ins().isub(self.end, top);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, bytes, available);
        let used = self.b.ins().isub(top, self.base);
        let needed = self.b.ins().iadd(used, bytes);
        self.check(fits, Status::WorkspaceTooSmall, needed);
        let new_top = self.b.ins().iadd(top, bytes);
        self.b.def_var(self.top, new_top);
        top
    }

    /// The value of a size expression.
    pub fn size(&mut self, s: &Size) -> Result<Value, JitError> {
        let mut acc = self.b.ins().iconst(types::I64, s.constant);
        for (v, &k) in &s.terms {
            let Some(&x) = self.sizes.get(v) else {
                return unsupported(format!("the size variable `{v}` out of scope"));
            };
            let term = self.b.ins().imul_imm_s(x, k);
            acc = self.b.ins().iadd(acc, term);
        }
        Ok(acc)
    }

    /// The layout of a value of type `ty`. Lengths below 0 (the type of
    /// `shift1L` of an empty array) are 0, or an error when `strict`.
    pub fn shape_of_type(&mut self, ty: &Type, strict: bool) -> Result<Shape, JitError> {
        Ok(match ty {
            Type::Real => Shape::Real,
            Type::Tuple(ts) => Shape::Tuple(
                ts.iter()
                    .map(|t| self.shape_of_type(t, strict))
                    .collect::<Result<_, _>>()?,
            ),
            Type::Array(elem, n) => {
                let len = self.size(n)?;
                let len = if strict {
                    let not_a_size_var = self.b.ins().iconst(types::I64, -1);
                    self.check_size(len, not_a_size_var);
                    len
                } else {
                    let zero = self.b.ins().iconst(types::I64, 0);
                    self.b.ins().smax(len, zero)
                };
                Shape::Array(len, Box::new(self.shape_of_type(elem, strict)?))
            }
            Type::Bool | Type::Fun(..) => return unsupported(format!("a value of type `{ty}`")),
        })
    }

    /// The type of `e` in the current scope.
    pub fn type_of(&mut self, e: &Expr) -> Result<Type, JitError> {
        self.typer
            .infer(e)
            .map_err(|err| JitError::Internal(format!("type of a subterm: {err}")))
    }

    /// Binds a pattern to a value (and its type, for the typer).
    pub fn bind(&mut self, pat: &Pattern, v: Values, ty: &Type) -> Result<(), JitError> {
        match (pat, v, ty) {
            (Pattern::Var(n, _), v, ty) => {
                self.env.insert(n.clone(), v);
                self.typer.push(n.clone(), ty.clone());
            }
            (Pattern::Wild(_), _, _) => {}
            (Pattern::Tuple(ps, _), Values::Tuple(vs), Type::Tuple(ts))
                if ps.len() == vs.len() && ps.len() == ts.len() =>
            {
                for ((p, v), t) in ps.iter().zip(vs).zip(ts) {
                    self.bind(p, v, t)?;
                }
            }
            _ => return Err(JitError::Internal("a pattern that does not match".into())),
        }
        Ok(())
    }

    /// Lowers a term to its values.
    pub fn lower(&mut self, e: &Expr) -> Result<Values, JitError> {
        guard(|| self.lower_inner(e))
    }

    fn lower_inner(&mut self, e: &Expr) -> Result<Values, JitError> {
        match &e.kind {
            ExprKind::Const(c) => Ok(Values::Real(self.b.ins().f64const(*c))),
            ExprKind::Var(n) => {
                if let Some(v) = self.env.get(n) {
                    Ok(v.clone())
                } else if let Some(&s) = self.sizes.get(n) {
                    Ok(Values::Real(self.b.ins().fcvt_from_sint(REAL, s)))
                } else {
                    Err(JitError::Internal(format!("unbound variable `{n}`")))
                }
            }
            ExprKind::Prim(p, args) => {
                let mut xs = Vec::with_capacity(args.len());
                for a in args {
                    match self.lower(a)? {
                        Values::Real(v) | Values::Bool(v) => xs.push(v),
                        _ => return Err(JitError::Internal(format!("operand of `{p}`"))),
                    }
                }
                let libm = self.libm.clone();
                let lookup = move |f: Libm| libm[Libm::ALL.iter().position(|g| *g == f).unwrap()];
                let v = lower_prim(self.b, &lookup, *p, &xs);
                Ok(match p.info().kind {
                    gradlift_lang::prim::PrimKind::Real => Values::Real(v),
                    _ => Values::Bool(v),
                })
            }
            ExprKind::Let { .. } => {
                let mut cur = e;
                while let ExprKind::Let {
                    pat,
                    ty,
                    value,
                    body,
                } = &cur.kind
                {
                    let t = match ty {
                        Some(t) => t.clone(),
                        None => self.type_of(value)?,
                    };
                    let v = self.lower(value)?;
                    self.bind(pat, v, &t)?;
                    cur = body;
                }
                self.lower(cur)
            }
            ExprKind::Tuple(es) => Ok(Values::Tuple(
                es.iter().map(|x| self.lower(x)).collect::<Result<_, _>>()?,
            )),
            ExprKind::Proj(x, k) => match self.lower(x)? {
                Values::Tuple(mut vs) if *k < vs.len() => Ok(vs.swap_remove(*k)),
                _ => Err(JitError::Internal(format!("projection .{k}"))),
            },
            ExprKind::If(c, then, other) => self.lower_if(c, then, other),
            ExprKind::Index(a, k) => {
                let a = self.array(a)?;
                self.index(&a, *k)
            }
            ExprKind::ArrayLit(es) => self.array_literal(e, es),
            ExprKind::ArrayOp(op, f, args) => self.array_op(*op, f, args),
            ExprKind::Builtin(bi, args) => self.builtin(*bi, args),
            ExprKind::Lambda(..) => unsupported("a lambda outside an array operation"),
            ExprKind::Apply(..) => unsupported("a function application"),
            ExprKind::PrimFn(p) => unsupported(format!("the primitive `{p}` as a value")),
        }
    }

    /// Lowers a term that must be an array.
    pub fn array(&mut self, e: &Expr) -> Result<ArrayVal, JitError> {
        match self.lower(e)? {
            Values::Array(a) => Ok(a),
            _ => Err(JitError::Internal("expected an array".into())),
        }
    }

    /// Lowers a term that must be a real.
    pub fn real(&mut self, e: &Expr) -> Result<Value, JitError> {
        match self.lower(e)? {
            Values::Real(v) => Ok(v),
            _ => Err(JitError::Internal("expected a real".into())),
        }
    }

    /// `if`: a block per branch, a merge block whose parameters are the
    /// flattened result.
    fn lower_if(&mut self, c: &Expr, then: &Expr, other: &Expr) -> Result<Values, JitError> {
        let cond = match self.lower(c)? {
            Values::Bool(v) => v,
            _ => return Err(JitError::Internal("condition of `if`".into())),
        };
        let (then_block, else_block, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(cond, then_block, &[], else_block, &[]);
        self.b.switch_to_block(then_block);
        let t = self.lower(then)?;
        let flat = t.to_vec();
        for v in &flat {
            let ty = self.b.func.dfg.value_type(*v);
            self.b.append_block_param(merge, ty);
        }
        let args: Vec<BlockArg> = flat.iter().map(|v| BlockArg::from(*v)).collect();
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(else_block);
        let f = self.lower(other)?;
        let args: Vec<BlockArg> = f.to_vec().into_iter().map(BlockArg::from).collect();
        if args.len() != flat.len() {
            return Err(JitError::Internal(
                "branches of `if` differ in layout".into(),
            ));
        }
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(merge);
        let params = self.b.block_params(merge).to_vec();
        Ok(t.rebuild(&mut params.into_iter()))
    }
}
