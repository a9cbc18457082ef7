//! Loops in pairs: a `map`/`map2` of reals, and a `reduce` of reals in
//! lanes, computing elements `i` and `i + 1` at once in the two lanes of an
//! `f64x2` vector.
//!
//! ## What runs in pairs
//!
//! A loop runs in pairs when every element it reads is a pair source and
//! the term that computes its element is a pair term of reals:
//!
//! - a **pair source** is an array of reals (two adjacent elements are one
//!   unaligned 16-byte load), a range `iota(n)` (the index pair
//!   `[i, i + 1]`), a one-hot of a constant position, a `map`/`map2`
//!   written in place over pair sources whose body is a pair term, or a
//!   shift or `take` of a pair source;
//! - a **pair term** computes two reals (`f64x2`), two integers (`i64x2`)
//!   or two conditions (a lane mask): a constant; a variable bound to a
//!   pair (a parameter, a `let` of a pair term) or to a real or an integer
//!   computed before the loop, or a component of a tuple bound to such
//!   values (the same in both lanes); a `let` of a pair term to a name; a
//!   primitive applied to pair terms — from reals to a real
//!   ([`PrimKind::Real`]), a comparison of reals or of integers, `and`,
//!   `or`, `not`, integer `+`, `-`, `*`, negation; or `if c then a else b`
//!   with `c` a condition and `a`, `b` pair terms of one kind, both
//!   computed and selected lane by lane.
//!
//! Nothing else: no indexing, no `len`, no conversion between reals and
//! integers, no integer division, no nested array operation — so nothing
//! in a pair term can fail, computing an element cannot stop the loop,
//! computing two at once hides no error, and computing both sides of an
//! `if` is safe.
//!
//! ## The contract: the bits are the scalar loop's
//!
//! Every lane computes exactly the operations of its element, in the same
//! order, with the same roundings (`prims::lower_prim_pair`), so a map in
//! pairs writes the bits of the scalar loop. A `reduce` in lanes keeps
//! `gradlift_lang::reduce_order`'s grouping: lanes 0 and 1 of the order
//! are the two lanes of one vector, lanes 2 and 3 of a second, and element
//! `4b + j` goes to lane `j` as before; the lanes are taken out of the
//! vectors and combined by the same tree, and the tail is the same scalar
//! left fold. The interpreter, which knows nothing of vectors, therefore
//! agrees bit for bit with the native code, whichever path a loop takes.
//!
//! A map in pairs writes its last element, when its length is odd, with
//! the scalar body. The folds riding along a map (`horizontal.rs`) take
//! their steps one element at a time, element `i` then `i + 1`, as in the
//! scalar loop.

use super::*;
use crate::prims::{lower_prim_pair, PAIR};
use crate::split::{Combine, PARALLEL_MIN};
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::FuncRef;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::reduce_order::CHUNK;
use gradlift_lang::reduce_order::LANES;
use gradlift_lang::{Name, Pattern};
use std::collections::HashMap;

/// What a pair holds: two reals (`f64x2`), two integers (`i64x2`), or two
/// conditions (a lane mask, as vector comparisons give).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    Real,
    Int,
    Cond,
}

/// Vector loads and stores of reals: no trap, no alignment beyond the
/// reals' 8 bytes.
fn unaligned() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

impl Translator<'_, '_> {
    /// Whether `s` is a pair source of reals (see the module doc).
    pub(super) fn pair_source(&self, s: &Source<'_>) -> bool {
        self.source_lane(s) == Some(Lane::Real)
    }

    /// What a pair source's elements are, or `None` for a source that is
    /// not one.
    fn source_lane(&self, s: &Source<'_>) -> Option<Lane> {
        match s {
            Source::Array(a, _) => matches!(a.elem, Shape::Real).then_some(Lane::Real),
            Source::Mapped {
                inputs,
                params,
                body,
                tys,
                ..
            } => {
                let lanes: Option<Vec<Lane>> = inputs.iter().map(|s| self.source_lane(s)).collect();
                self.pair_lambda_lane(params, tys, &lanes?, body)
            }
            Source::Shifted { inner, .. } => self.source_lane(inner),
            Source::Iota(_) => Some(Lane::Int),
            Source::OneHot { .. } => Some(Lane::Real),
            Source::Scan { .. } | Source::Concat { .. } => None,
        }
    }

    /// What `(params. body)` computes as a pair term, its parameters of
    /// types `tys` bound to pairs of `lanes`.
    fn pair_lambda_lane(
        &self,
        params: &[Param],
        tys: &[Type],
        lanes: &[Lane],
        body: &Expr,
    ) -> Option<Lane> {
        if params.len() != tys.len() || params.len() != lanes.len() {
            return None;
        }
        let mut bound = Vec::new();
        for ((p, ty), lane) in params.iter().zip(tys).zip(lanes) {
            let want = match ty {
                Type::Real => Lane::Real,
                Type::Int => Lane::Int,
                _ => return None,
            };
            if want != *lane {
                return None;
            }
            match &p.pat {
                Pattern::Var(n, _) => bound.push((n.clone(), want)),
                Pattern::Wild(_) => {}
                Pattern::Tuple(..) => return None,
            }
        }
        self.pair_term(body, &mut bound)
    }

    /// The scalar value of a term computed before the loop that a pair
    /// term reads: a variable of the environment bound to a real or an
    /// integer, or a component of a tuple bound to one (`ext.1`).
    fn invariant(&self, e: &Expr) -> Option<&Values> {
        match &e.kind {
            ExprKind::Var(n) => self.env.get(n),
            ExprKind::Proj(inner, k) => match self.invariant(inner)? {
                Values::Tuple(vs) => vs.get(*k),
                _ => None,
            },
            _ => None,
        }
    }

    /// What `e` computes as a pair term, the names in `bound` being bound
    /// to pairs, or `None` when it is not one.
    fn pair_term(&self, e: &Expr, bound: &mut Vec<(Name, Lane)>) -> Option<Lane> {
        match &e.kind {
            ExprKind::Const(_) => Some(Lane::Real),
            ExprKind::Int(_) => Some(Lane::Int),
            ExprKind::Var(n) if bound.iter().any(|(m, _)| m == n) => {
                bound.iter().rev().find(|(m, _)| m == n).map(|(_, l)| *l)
            }
            ExprKind::Var(_) | ExprKind::Proj(..) => match self.invariant(e)? {
                Values::Real(_) => Some(Lane::Real),
                Values::Int(_) => Some(Lane::Int),
                _ => None,
            },
            ExprKind::Prim(p, args) => {
                let lanes: Option<Vec<Lane>> =
                    args.iter().map(|a| self.pair_term(a, bound)).collect();
                let lanes = lanes?;
                let all = |l: Lane| lanes.iter().all(|x| *x == l);
                use gradlift_lang::prim::{IntOp, Lowering};
                match p.info().kind() {
                    PrimKind::Real => all(Lane::Real).then_some(Lane::Real),
                    PrimKind::Compare => all(Lane::Real).then_some(Lane::Cond),
                    PrimKind::IntCompare => all(Lane::Int).then_some(Lane::Cond),
                    PrimKind::Logic => all(Lane::Cond).then_some(Lane::Cond),
                    PrimKind::Int => match p.info().lowering {
                        Lowering::Int(IntOp::Add | IntOp::Sub | IntOp::Mul | IntOp::Neg) => {
                            all(Lane::Int).then_some(Lane::Int)
                        }
                        _ => None,
                    },
                    PrimKind::ToReal | PrimKind::ToInt => None,
                }
            }
            ExprKind::If(c, a, b) => {
                let c = self.pair_term(c, bound)?;
                let (a, b) = (self.pair_term(a, bound)?, self.pair_term(b, bound)?);
                (c == Lane::Cond && a == b && a != Lane::Cond).then_some(a)
            }
            ExprKind::Let {
                pat: Pattern::Var(n, _),
                value,
                body,
                ..
            } => {
                let lane = self.pair_term(value, bound)?;
                bound.push((n.clone(), lane));
                let r = self.pair_term(body, bound);
                bound.pop();
                r
            }
            _ => None,
        }
    }

    /// Elements `i` and `i + 1` of a pair source, as one vector.
    pub(super) fn pair_element(&mut self, s: &Source<'_>, i: Value) -> Result<Value, JitError> {
        match s {
            Source::Array(a, _) => {
                let ptr = self.entry_copy(a.ptr);
                let offset = self.b.ins().ishl_imm_s(i, 3);
                let at = self.b.ins().iadd(ptr, offset);
                Ok(self.b.ins().load(PAIR, unaligned(), at, 0))
            }
            Source::Mapped {
                expr,
                inputs,
                params,
                body,
                ..
            } => {
                let mut env = Vec::with_capacity(params.len());
                for (p, s) in params.iter().zip(inputs) {
                    let x = self.pair_element(s, i)?;
                    if let Pattern::Var(n, _) = &p.pat {
                        env.push((n.clone(), x));
                    }
                }
                // `emit --stage clif` labels the fused map's instructions
                // with its term, inside the consumer's loop.
                self.labelled(
                    || crate::annotate::one_line(expr),
                    |t| t.pair_lower(body, &mut env),
                )
            }
            Source::Shifted { inner, offset, .. } => {
                let i = match offset {
                    Some(k) => self.b.ins().iadd(i, *k),
                    None => i,
                };
                self.pair_element(inner, i)
            }
            Source::Iota(_) => Ok(self.index_pair(i)),
            Source::OneHot { at, hit, miss, .. } => {
                let is = self.index_pair(i);
                let at = self.b.ins().iconst(types::I64, *at);
                let at = self.b.ins().splat(types::I64X2, at);
                let here = self.b.ins().icmp(IntCC::Equal, is, at);
                let (hit, miss) = (self.entry_copy(*hit), self.entry_copy(*miss));
                let hit = self.b.ins().splat(PAIR, hit);
                let miss = self.b.ins().splat(PAIR, miss);
                Ok(self.select_pair(here, hit, miss))
            }
            Source::Scan { .. } | Source::Concat { .. } => {
                Err(JitError::Internal("a pair of a source that is not".into()))
            }
        }
    }

    /// `[i, i + 1]` as integers.
    fn index_pair(&mut self, i: Value) -> Value {
        let v = self.b.ins().scalar_to_vector(types::I64X2, i);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().insertlane(v, next, 1)
    }

    /// `if mask then a else b` lane by lane, for pairs of reals or of
    /// integers (`mask` as comparisons of pairs give it).
    fn select_pair(&mut self, mask: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let mask = if self.b.func.dfg.value_type(mask) == ty {
            mask
        } else {
            self.b.ins().bitcast(ty, MemFlagsData::new(), mask)
        };
        self.b.ins().bitselect(mask, a, b)
    }

    /// Lowers a pair term, the names of `env` bound to vectors.
    fn pair_lower(&mut self, e: &Expr, env: &mut Vec<(Name, Value)>) -> Result<Value, JitError> {
        match &e.kind {
            ExprKind::Const(c) => {
                let x = self.b.ins().f64const(*c);
                Ok(self.b.ins().splat(PAIR, x))
            }
            ExprKind::Int(k) => {
                let x = self.b.ins().iconst(types::I64, *k);
                Ok(self.b.ins().splat(types::I64X2, x))
            }
            ExprKind::Var(n) if env.iter().any(|(m, _)| m == n) => env
                .iter()
                .rev()
                .find(|(m, _)| m == n)
                .map(|(_, v)| *v)
                .ok_or_else(|| JitError::Internal(format!("`{n}` in a pair term"))),
            ExprKind::Var(_) | ExprKind::Proj(..) => match self.invariant(e).cloned() {
                Some(Values::Real(x)) => {
                    let x = self.entry_copy(x);
                    Ok(self.b.ins().splat(PAIR, x))
                }
                Some(Values::Int(x)) => {
                    let x = self.entry_copy(x);
                    Ok(self.b.ins().splat(types::I64X2, x))
                }
                _ => Err(JitError::Internal("a value in a pair term".into())),
            },
            ExprKind::Prim(p, args) => {
                let mut xs = Vec::with_capacity(args.len());
                for a in args {
                    xs.push(self.pair_lower(a, env)?);
                }
                use gradlift_lang::prim::{Comparison, Connective, IntOp, Lowering};
                let cc = |c: Comparison| match c {
                    Comparison::Lt => (FloatCC::LessThan, IntCC::SignedLessThan),
                    Comparison::Le => (FloatCC::LessThanOrEqual, IntCC::SignedLessThanOrEqual),
                    Comparison::Gt => (FloatCC::GreaterThan, IntCC::SignedGreaterThan),
                    Comparison::Ge => {
                        (FloatCC::GreaterThanOrEqual, IntCC::SignedGreaterThanOrEqual)
                    }
                    Comparison::Eq => (FloatCC::Equal, IntCC::Equal),
                    Comparison::Ne => (FloatCC::NotEqual, IntCC::NotEqual),
                };
                Ok(match p.info().lowering {
                    Lowering::Compare(c) => self.b.ins().fcmp(cc(c).0, xs[0], xs[1]),
                    Lowering::IntCompare(c) => self.b.ins().icmp(cc(c).1, xs[0], xs[1]),
                    Lowering::Logic(Connective::And) => self.b.ins().band(xs[0], xs[1]),
                    Lowering::Logic(Connective::Or) => self.b.ins().bor(xs[0], xs[1]),
                    Lowering::Logic(Connective::Not) => self.b.ins().bnot(xs[0]),
                    Lowering::Int(IntOp::Add) => self.b.ins().iadd(xs[0], xs[1]),
                    Lowering::Int(IntOp::Sub) => self.b.ins().isub(xs[0], xs[1]),
                    Lowering::Int(IntOp::Mul) => self.b.ins().imul(xs[0], xs[1]),
                    Lowering::Int(IntOp::Neg) => self.b.ins().ineg(xs[0]),
                    _ => {
                        let calls = &self.calls;
                        let lookup = |q: gradlift_lang::Prim| calls[&q];
                        lower_prim_pair(self.b, &lookup, self.exp_table, *p, &xs)
                    }
                })
            }
            ExprKind::If(c, a, b) => {
                let c = self.pair_lower(c, env)?;
                let a = self.pair_lower(a, env)?;
                let b = self.pair_lower(b, env)?;
                Ok(self.select_pair(c, a, b))
            }
            ExprKind::Let {
                pat: Pattern::Var(n, _),
                value,
                body,
                ..
            } => {
                let v = self.pair_lower(value, env)?;
                env.push((n.clone(), v));
                let r = self.pair_lower(body, env);
                env.pop();
                r
            }
            _ => Err(JitError::Internal("a term that is not a pair term".into())),
        }
    }

    /// Whether a map's loop runs in pairs: it stores reals and reads
    /// pair sources through a pair term.
    pub(super) fn pair_mapping(&self, m: &Mapping<'_>) -> bool {
        let lanes: Option<Vec<Lane>> = m.sources.iter().map(|s| self.source_lane(s)).collect();
        matches!(m.shape, Shape::Real)
            && lanes.is_some_and(|lanes| {
                self.pair_lambda_lane(m.params, &m.tys, &lanes, m.body) == Some(Lane::Real)
            })
    }

    /// The loop of a [`Mapping`] in pairs (see [`Translator::pair_mapping`]),
    /// writing element `i` at `ptr + 8i`, an odd last element with the
    /// scalar body. The `folds` riding along the map (their variables
    /// `results`) take their steps on element `i`, then on `i + 1`: their
    /// order is the scalar loop's. Without folds, at the top of the
    /// function, the map is a kernel run in chunks, on the thread pool when
    /// it is long (`split.rs`).
    pub(super) fn write_mapping_in_pairs(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        folds: &[Fold<'_>],
        results: &[cranelift_frontend::Variable],
    ) -> Result<(), JitError> {
        let short = self.constant(m.len).is_some_and(|n| n < PARALLEL_MIN);
        if folds.is_empty() && self.may_split() && !short {
            return self.split_map(m, ptr);
        }
        let zero = self.iconst(0);
        self.pairs_in_range(m, ptr, folds, results, zero, m.len)
    }

    /// Elements `start .. end` of a map in pairs (`start` even), written
    /// at `ptr + 8i`, the folds riding along taking their steps.
    fn pairs_in_range(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        folds: &[Fold<'_>],
        results: &[cranelift_frontend::Variable],
        start: Value,
        end: Value,
    ) -> Result<(), JitError> {
        let count = self.b.ins().isub(end, start);
        // (A fold's variables leave the pairs' loop through its exit.)
        let pairs = self.b.ins().ushr_imm_s(count, 1);
        self.for_range_out(pairs, results, &mut |t, k| {
            let start = t.entry_copy(start);
            let i = t.b.ins().ishl_imm_s(k, 1);
            let i = t.b.ins().iadd(start, i);
            let mut env = Vec::with_capacity(m.params.len());
            for (p, s) in m.params.iter().zip(&m.sources) {
                let x = t.pair_element(s, i)?;
                if let Pattern::Var(n, _) = &p.pat {
                    env.push((n.clone(), x));
                }
            }
            let v = t.pair_lower(m.body, &mut env)?;
            let to = t.entry_copy(ptr);
            let offset = t.b.ins().ishl_imm_s(i, 3);
            let at = t.b.ins().iadd(to, offset);
            t.b.ins().store(unaligned(), v, at, 0);
            for lane in 0..2 {
                let mark = t.mark();
                let own = t.b.ins().extractlane(v, lane);
                let at = t.b.ins().iadd_imm_s(i, i64::from(lane));
                t.step_folds(folds, at, Some(Values::Real(own)))?;
                t.release(mark);
            }
            Ok(())
        })?;
        // An odd last element: a branch, not a loop.
        let odd = self.b.ins().band_imm_s(count, 1);
        let tail = self.b.create_block();
        let done = self.b.create_block();
        self.b.ins().brif(odd, tail, &[], done, &[]);
        self.b.switch_to_block(tail);
        self.b.seal_block(tail);
        self.region(|t| {
            let i = t.b.ins().iadd_imm_s(end, -1);
            let eight = t.iconst(8);
            t.write_element(m, ptr, eight, folds, i)
        })?;
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        self.b.seal_block(done);
        Ok(())
    }

    /// Whether a loop lowered here may be split across the thread pool:
    /// it is not inside another loop, and the code runs in this process
    /// with a pool of more than one thread.
    pub(super) fn may_split(&self) -> bool {
        // (`kernels` is present only then: `Jit::lower`.)
        self.kernels.is_some() && self.loops.is_empty()
    }

    /// The values a pair source reads from before its loop, and the
    /// variables its terms read by name (binders are unique, so a name of the
    /// environment is the same variable everywhere).
    fn captures(&self, s: &Source<'_>, values: &mut Vec<Value>, names: &mut Vec<Name>) {
        match s {
            Source::Array(a, stride) => values.extend([a.ptr, a.len, *stride]),
            Source::Mapped {
                inputs,
                params,
                body,
                len,
                ..
            } => {
                values.push(*len);
                for s in inputs {
                    self.captures(s, values, names);
                }
                self.captures_of_body(params, body, values, names);
            }
            Source::Shifted { inner, offset, len } => {
                values.extend(offset.iter().copied());
                values.push(*len);
                self.captures(inner, values, names);
            }
            Source::Iota(n) => values.push(*n),
            Source::OneHot { hit, miss, len, .. } => values.extend([*hit, *miss, *len]),
            Source::Scan { .. } | Source::Concat { .. } => {}
        }
    }

    /// Defines a kernel (`split.rs`) reading `values` — the loop's
    /// captures, stored by the caller at `env + 8k` — and the variables
    /// `names` among them, whose `body` computes chunk `c` given the
    /// kernel's translator, its own copies of the values and `c`. Returns
    /// the kernel and the address of the captures, stored here.
    #[allow(clippy::type_complexity)]
    fn define_kernel(
        &mut self,
        values: &[Value],
        names: &[Name],
        body: &mut dyn FnMut(
            &mut Translator<'_, '_>,
            &HashMap<Value, Value>,
            Value,
        ) -> Result<Value, JitError>,
    ) -> Result<(FuncRef, Value), JitError> {
        let tys: Vec<types::Type> = values
            .iter()
            .map(|v| self.b.func.dfg.value_type(*v))
            .collect();
        let named: Vec<Values> = names
            .iter()
            .map(|n| {
                self.env
                    .get(n)
                    .cloned()
                    .ok_or_else(|| JitError::Internal(format!("the variable `{n}` of a kernel")))
            })
            .collect::<Result<_, _>>()?;
        let types: Vec<Type> = names
            .iter()
            .map(|n| self.type_of(&Expr::synth(ExprKind::Var(n.clone()))))
            .collect::<Result<_, _>>()?;
        let Some(sink) = self.kernels.take() else {
            return Err(JitError::Internal("a kernel without a module".into()));
        };
        let kernel = sink.define(self.b.func, &mut |kt, env, chunk| {
            let mut copies = HashMap::new();
            for (k, (v, ty)) in values.iter().zip(&tys).enumerate() {
                if !copies.contains_key(v) {
                    let x = kt.b.ins().load(*ty, mem(), env, 8 * k as i32);
                    copies.insert(*v, x);
                }
            }
            for ((n, v), ty) in names.iter().zip(&named).zip(&types) {
                let mut own = v.to_vec().into_iter().map(|x| copies[&x]);
                kt.env.insert(n.clone(), v.rebuild(&mut own));
                kt.typer.push(n.clone(), ty.clone());
            }
            body(kt, &copies, chunk)
        });
        self.kernels = Some(sink);
        let kernel = kernel?;
        let slot = self
            .b
            .create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                8 * values.len().max(1) as u32,
                3,
            ));
        let env = self.b.ins().stack_addr(types::I64, slot, 0);
        for (k, v) in values.iter().enumerate() {
            self.b.ins().store(mem(), *v, env, 8 * k as i32);
        }
        Ok((kernel, env))
    }

    /// Calls the runtime's `gradlift_split` on `kernel` over `chunks`
    /// chunks, combining a reduce's results by `combine`.
    fn call_split(
        &mut self,
        kernel: FuncRef,
        env: Value,
        chunks: Value,
        combine: Option<Combine>,
    ) -> Result<Value, JitError> {
        let Some(rt) = self.runtime else {
            return Err(JitError::Internal("a split loop without a runtime".into()));
        };
        let f = self.b.ins().func_addr(types::I64, kernel);
        let op = self.iconst(combine.map_or(0, |c| c as i64));
        let pool = self.pool_address(rt);
        let call = self.b.ins().call(rt.split, &[f, env, chunks, op, pool]);
        Ok(self.b.inst_results(call)[0])
    }

    /// The number of chunks of `n` elements: `n / CHUNK` rounded up, at
    /// least 1.
    pub(super) fn chunk_count(&mut self, n: Value) -> Value {
        let up = self.b.ins().iadd_imm_s(n, CHUNK as i64 - 1);
        let count = self.b.ins().ushr_imm_s(up, CHUNK.trailing_zeros() as i64);
        let one = self.iconst(1);
        self.b.ins().umax(count, one)
    }

    /// A map in pairs split across the pool: each chunk of its elements
    /// computed by a kernel.
    fn split_map(&mut self, m: &Mapping<'_>, ptr: Value) -> Result<(), JitError> {
        let (mut values, mut names) = (vec![ptr, m.len], Vec::new());
        for s in &m.sources {
            self.captures(s, &mut values, &mut names);
        }
        self.captures_of_body(m.params, m.body, &mut values, &mut names);
        let (kernel, env) = self.define_kernel(&values, &names, &mut |kt, copies, chunk| {
            let sources = m
                .sources
                .iter()
                .map(|s| remap(s, copies))
                .collect::<Result<_, _>>()?;
            let km = Mapping {
                params: m.params,
                body: m.body,
                tys: m.tys.clone(),
                out_ty: m.out_ty.clone(),
                sources,
                len: copies[&m.len],
                size: m.size.clone(),
                shape: Shape::Real,
            };
            let (start, end) = chunk_range(kt, chunk, km.len);
            kt.pairs_in_range(&km, copies[&ptr], &[], &[], start, end)?;
            Ok(kt.b.ins().f64const(0.0))
        })?;
        let chunks = self.chunk_count(m.len);
        self.call_split(kernel, env, chunks, None)?;
        Ok(())
    }

    /// The variables the body of a function of `params` reads from outside
    /// it, as [`Translator::captures`] finds them in a mapped source. A
    /// name the function binds itself is not one, even when the
    /// environment holds it: a copy of the same lambda lowered before
    /// (binders are unique up to such copies) left its parameter there,
    /// bound to a value of that earlier loop, which does not dominate this
    /// one.
    fn captures_of_body(
        &self,
        params: &[Param],
        body: &Expr,
        values: &mut Vec<Value>,
        names: &mut Vec<Name>,
    ) {
        let mut bound = Vec::new();
        params.iter().for_each(|p| p.pat.names(&mut bound));
        let mut stack = vec![body];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Lambda(ps, _) => ps.iter().for_each(|p| p.pat.names(&mut bound)),
                ExprKind::Let { pat, .. } => pat.names(&mut bound),
                _ => {}
            }
            stack.extend(e.children());
        }
        let mut stack = vec![body];
        while let Some(e) = stack.pop() {
            if let ExprKind::Var(n) = &e.kind {
                if let Some(v) = self.env.get(n).filter(|_| !bound.contains(n)) {
                    if !names.contains(n) {
                        names.push(n.clone());
                        v.flatten(values);
                    }
                }
            }
            stack.extend(e.children());
        }
    }

    /// A `reduce` in lanes of a pair source split across the pool: each
    /// chunk's result computed by a kernel, the results combined from the
    /// left by the runtime. Returns `((r₀ op r₁) op …)`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn split_reduce(
        &mut self,
        p: gradlift_lang::Prim,
        params: &[Param],
        body: &Expr,
        a: &Source<'_>,
        tys: &[Type; 2],
        chunks: Value,
    ) -> Result<Value, JitError> {
        let Some(combine) = Combine::of(p) else {
            return Err(JitError::Internal(format!("a split reduce by `{p}`")));
        };
        let (mut values, mut names) = (Vec::new(), Vec::new());
        self.captures(a, &mut values, &mut names);
        let len = a.len();
        values.push(len);
        let (kernel, env) = self.define_kernel(&values, &names, &mut |kt, copies, chunk| {
            let source = remap(a, copies)?;
            let (start, end) = chunk_range(kt, chunk, copies[&len]);
            let n = kt.b.ins().isub(end, start);
            kt.chunk_in_lanes(p, params, body, &source, tys, start, n)
        })?;
        self.call_split(kernel, env, chunks, Some(combine))
    }
    /// The lanes of `gradlift_lang::reduce_order` over the whole blocks of
    /// a chunk of a pair source from element `start`, by the lane
    /// primitive `p`: lanes 0 and 1 in one vector, 2 and 3 in another,
    /// each starting at `identity`. Returns the four lanes, in order.
    pub(super) fn lanes_in_pairs(
        &mut self,
        p: gradlift_lang::Prim,
        identity: f64,
        a: &Source<'_>,
        start: Value,
        blocks: Value,
    ) -> Result<[Value; LANES], JitError> {
        const _: () = assert!(LANES == 4, "two pairs of lanes");
        let e = self.b.ins().f64const(identity);
        let e = self.b.ins().splat(PAIR, e);
        let vars = [self.b.declare_var(PAIR), self.b.declare_var(PAIR)];
        for v in vars {
            self.b.def_var(v, e);
        }
        self.for_range_out(blocks, &vars, &mut |t, b| {
            let base = t.b.ins().ishl_imm_s(b, LANES.trailing_zeros() as i64);
            let start = t.entry_copy(start);
            let base = t.b.ins().iadd(start, base);
            for (j, var) in vars.iter().enumerate() {
                let i = t.b.ins().iadd_imm_s(base, 2 * j as i64);
                let x = t.pair_element(a, i)?;
                let acc = t.b.use_var(*var);
                let calls = &t.calls;
                let lookup = |q: gradlift_lang::Prim| calls[&q];
                let next = lower_prim_pair(t.b, &lookup, t.exp_table, p, &[acc, x]);
                t.b.def_var(*var, next);
            }
            Ok(())
        })?;
        let (v0, v1) = (self.b.use_var(vars[0]), self.b.use_var(vars[1]));
        Ok([
            self.b.ins().extractlane(v0, 0),
            self.b.ins().extractlane(v0, 1),
            self.b.ins().extractlane(v1, 0),
            self.b.ins().extractlane(v1, 1),
        ])
    }
}

/// Elements `start .. end` of chunk `c` of `n`.
fn chunk_range(t: &mut Translator<'_, '_>, c: Value, n: Value) -> (Value, Value) {
    let start = t.b.ins().ishl_imm_s(c, CHUNK.trailing_zeros() as i64);
    let next = t.b.ins().iadd_imm_s(start, CHUNK as i64);
    let end = t.b.ins().smin(next, n);
    (start, end)
}

/// A pair source with the values it reads replaced by their copies in a
/// kernel.
fn remap<'e>(s: &Source<'e>, copies: &HashMap<Value, Value>) -> Result<Source<'e>, JitError> {
    let copy = |v: &Value| {
        copies
            .get(v)
            .copied()
            .ok_or_else(|| JitError::Internal("a value a kernel does not capture".into()))
    };
    Ok(match s {
        Source::Array(a, stride) => Source::Array(
            ArrayVal {
                ptr: copy(&a.ptr)?,
                len: copy(&a.len)?,
                elem: Shape::Real,
            },
            copy(stride)?,
        ),
        Source::Mapped {
            expr,
            inputs,
            params,
            body,
            tys,
            len,
        } => Source::Mapped {
            expr,
            inputs: inputs
                .iter()
                .map(|s| remap(s, copies))
                .collect::<Result<_, _>>()?,
            params,
            body,
            tys: tys.clone(),
            len: copy(len)?,
        },
        Source::Shifted { inner, offset, len } => Source::Shifted {
            inner: Box::new(remap(inner, copies)?),
            offset: offset.map(|k| copy(&k)).transpose()?,
            len: copy(len)?,
        },
        Source::Iota(n) => Source::Iota(copy(n)?),
        Source::OneHot { at, hit, miss, len } => Source::OneHot {
            at: *at,
            hit: copy(hit)?,
            miss: copy(miss)?,
            len: copy(len)?,
        },
        _ => {
            return Err(JitError::Internal(
                "a split loop reads a source not in pairs".into(),
            ))
        }
    })
}
