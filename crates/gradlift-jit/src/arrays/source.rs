//! Sources: the elements a loop reads — an array, or a term whose
//! elements the loop computes where it reads them (a fused map, a range, a
//! shift or `take` of a fused array, a `concat`, a shifted scan carried in
//! the loop, a one-hot).

use super::*;

impl Translator<'_, '_> {
    /// The elements an array operation reads: an array, or a `map`/`map2`
    /// written in place as its argument, whose elements are computed in the
    /// consumer's loop instead of being stored (loop fusion). A term written
    /// in place is used once, so nothing is computed twice; the order of the
    /// operations on reals is the same, so the results are bit for bit
    /// those of the unfused loops.
    pub(super) fn source<'e>(&mut self, e: &'e Expr) -> Result<Source<'e>, JitError> {
        self.source_read(e, false)
    }

    /// [`Translator::source`], for a consumer that reads element `0`, then
    /// `1`, … up to the last, each once, if `in_order`: then a shift of a
    /// `scanl` of reals is computed in the consumer's loop too, its state
    /// carried from one element to the next (every state is computed, as
    /// it would be to store the scan).
    pub(super) fn source_read<'e>(
        &mut self,
        e: &'e Expr,
        in_order: bool,
    ) -> Result<Source<'e>, JitError> {
        if let Some(s) = self.one_hot(e)? {
            return Ok(s);
        }
        if let ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) = &e.kind {
            if let ExprKind::Lambda(params, body) = &f.kind {
                if params.len() == op.fn_arity() {
                    let (tys, inputs, len, _) = self.sources(args, in_order)?;
                    return Ok(Source::Mapped {
                        expr: e,
                        inputs,
                        params,
                        body,
                        tys,
                        len,
                    });
                }
            }
        }
        // `iota(n)[i]` is `i`: the range is not stored, so it takes no
        // workspace, whatever its length (a valid size: a whole number in
        // 0 ..= 2⁴⁰). So is a variable bound to one.
        if let Some(size) = self.range_size(e) {
            let n = self.count(&size)?;
            if let Ok(bound) = self.count_size(&size) {
                self.range_sizes.insert(n, bound);
            }
            return Ok(Source::Iota(n));
        }
        // `shift1L`/`shift1R` of a map whose elements cannot fail: the
        // consumer computes only the elements it reads (all but the first
        // or the last), so the one skipped must not hide an error.
        if let ExprKind::Builtin(bi @ (Builtin::Shift1L | Builtin::Shift1R), args) = &e.kind {
            if let [inner] = args.as_slice() {
                if fused_elements_cannot_fail(inner) {
                    let inner = self.source(inner)?;
                    let n = inner.len();
                    let nonempty = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
                    let dropped = self.b.ins().uextend(types::I64, nonempty);
                    let len = self.b.ins().isub(n, dropped);
                    let offset = (*bi == Builtin::Shift1L).then_some(dropped);
                    return Ok(Source::Shifted {
                        inner: Box::new(inner),
                        offset,
                        len,
                    });
                }
            }
        }
        // `shift1L (scanl f z A)` (the states after each element) or
        // `shift1R (scanl f z A)` (before each element), read in order:
        // the state is carried in variables through the consumer's loop.
        if let ExprKind::Builtin(bi @ (Builtin::Shift1L | Builtin::Shift1R), args) = &e.kind {
            if let [inner] = args.as_slice() {
                if let ExprKind::ArrayOp(ArrayOp::Scanl, f, scan_args) = &inner.kind {
                    if in_order {
                        if let Some(s) = self.scan_source(*bi == Builtin::Shift1R, f, scan_args)? {
                            return Ok(s);
                        }
                    }
                }
            }
        }
        // `take(k, S)` of a source whose elements cannot fail: its first
        // `k` elements, checked as a stored `take` is.
        if let ExprKind::Builtin(Builtin::Take, args) = &e.kind {
            if let [k, inner] = args.as_slice() {
                if fused_elements_cannot_fail(inner) {
                    let k = self.count(k)?;
                    let inner = self.source(inner)?;
                    let fits = self
                        .b
                        .ins()
                        .icmp(IntCC::SignedLessThanOrEqual, k, inner.len());
                    self.check(fits, Status::TakeDropOutOfRange, k);
                    return Ok(Source::Shifted {
                        inner: Box::new(inner),
                        offset: None,
                        len: k,
                    });
                }
            }
        }
        // `concat(A, B)` of reals: element `i` is `A[i]` below `len A`,
        // else `B[i - len A]`; each part is a source itself, so a map in it
        // is computed in the consumer's loop too. Both parts are built
        // before the loop, as they would be to store them; every element is
        // still computed once, in order.
        if let ExprKind::Builtin(Builtin::Concat, args) = &e.kind {
            if let ([first, second], Type::Array(elem, _)) = (args.as_slice(), self.type_of(e)?) {
                if *elem == Type::Real {
                    let first = self.source_read(first, in_order)?;
                    let second = self.source_read(second, in_order)?;
                    let split = first.len();
                    let len = self.b.ins().iadd(split, second.len());
                    return Ok(Source::Concat {
                        parts: Box::new((first, second)),
                        split,
                        len,
                    });
                }
            }
        }
        let a = self.array(e)?;
        let stride = unchecked_bytes(self.b, &a.elem);
        Ok(Source::Array(a, stride))
    }

    /// The size of `e` if it is an index range: `iota(n)`, or a variable
    /// bound to one.
    pub(super) fn range_size(&self, e: &Expr) -> Option<Expr> {
        let range = match &e.kind {
            ExprKind::Var(x) => self.ranges.get(x)?,
            _ => e,
        };
        match &range.kind {
            ExprKind::Builtin(Builtin::Iota, args) => args.first().cloned(),
            _ => None,
        }
    }

    /// `map (p. if p == c then A else B) R` for an index range `R`, a
    /// whole constant `c >= 0` and reals `A` and `B` that do not mention
    /// `p` and cannot fail — the reverse of reading `x[c]` — as a
    /// [`Source::OneHot`]: `A` and `B` are computed once, before the loop,
    /// and the loop compares integers.
    pub(super) fn one_hot<'e>(&mut self, e: &'e Expr) -> Result<Option<Source<'e>>, JitError> {
        let ExprKind::ArrayOp(ArrayOp::Map, f, args) = &e.kind else {
            return Ok(None);
        };
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Ok(None);
        };
        let ([param], [range]) = (params.as_slice(), args.as_slice()) else {
            return Ok(None);
        };
        let (gradlift_lang::Pattern::Var(p, _), ExprKind::If(test, hit, miss)) =
            (&param.pat, &body.kind)
        else {
            return Ok(None);
        };
        let ExprKind::Prim(gradlift_lang::Prim::IEq, xs) = &test.kind else {
            return Ok(None);
        };
        let c = match (&xs[0].kind, &xs[1].kind) {
            (ExprKind::Var(x), ExprKind::Int(c)) | (ExprKind::Int(c), ExprKind::Var(x))
                if x == p =>
            {
                *c
            }
            _ => return Ok(None),
        };
        if c < 0 {
            return Ok(None);
        }
        let sides = [hit.as_ref(), miss.as_ref()];
        if !sides.iter().all(|x| {
            cannot_fail(x) && mentions_of(x, p) == 0 && !matches!(x.kind, ExprKind::Tuple(_))
        }) {
            return Ok(None);
        }
        let Some(size) = self.range_size(range) else {
            return Ok(None);
        };
        let (Values::Real(hit), Values::Real(miss)) = (self.lower(hit)?, self.lower(miss)?) else {
            return Ok(None);
        };
        let len = self.count(&size)?;
        Ok(Some(Source::OneHot {
            at: c,
            hit,
            miss,
            len,
        }))
    }

    /// The [`Source::Scan`] of `scanl f z A` when its state is reals (an
    /// array state would live in the consumer's per-element temporaries).
    pub(super) fn scan_source<'e>(
        &mut self,
        before: bool,
        f: &'e Expr,
        args: &'e [Expr],
    ) -> Result<Option<Source<'e>>, JitError> {
        let (params, body) = self.lambda(f, 2)?;
        let acc_ty = self.type_of(&args[0])?;
        let Type::Array(elem, _) = self.type_of(&args[1])? else {
            return Err(JitError::Internal("expected an array type".into()));
        };
        let elem = *elem;
        if !matches!(self.shape_of_type(&acc_ty, false), Ok(s) if s.reals_only()) {
            return Ok(None);
        }
        let z = self.lower(&args[0])?;
        let input = self.source_read(&args[1], true)?;
        let vars = self.variables(&z);
        let len = input.len();
        Ok(Some(Source::Scan {
            state: z,
            vars,
            params,
            body,
            tys: [acc_ty, elem],
            input: Box::new(input),
            before,
            len,
        }))
    }

    /// The element types and sources of a `map`'s or `map2`'s arrays, and
    /// their common length.
    pub(super) fn sources<'e>(
        &mut self,
        args: &'e [Expr],
        in_order: bool,
    ) -> Result<(Vec<Type>, Vec<Source<'e>>, Value, Size), JitError> {
        let mut tys = Vec::new();
        let mut sources = Vec::new();
        let mut size = None;
        for a in args {
            match self.type_of(a)? {
                Type::Array(elem, n) => {
                    tys.push(*elem);
                    size.get_or_insert(n);
                }
                _ => return Err(JitError::Internal("expected an array type".into())),
            }
            sources.push(self.source_read(a, in_order)?);
        }
        let n = self.same_lengths(&sources)?;
        let size = size.ok_or_else(|| JitError::Internal("a map of no array".into()))?;
        Ok((tys, sources, n, size))
    }

    /// The common length of the sources of a `map2` (checked), or of a
    /// `map`'s one source.
    pub(super) fn same_lengths(&mut self, sources: &[Source<'_>]) -> Result<Value, JitError> {
        let n = sources[0].len();
        if let [_, second] = sources {
            let m = second.len();
            // Lengths that are one value (the same size expression) or
            // equal constants need no check.
            let known_equal = n == m
                || matches!((self.constant(n), self.constant(m)), (Some(x), Some(y)) if x == y);
            if !known_equal {
                let same = self.b.ins().icmp(IntCC::Equal, n, m);
                self.check(same, Status::LengthMismatch, m);
            }
        }
        Ok(n)
    }

    /// Element `i` of a source (`i` below its length).
    pub(super) fn element(&mut self, s: &Source<'_>, i: Value) -> Result<Values, JitError> {
        match s {
            Source::Array(a, stride) => {
                let ptr = self.entry_copy(a.ptr);
                let at = self.element_addr(ptr, i, *stride);
                Ok(load(self.b, at, &a.elem))
            }
            Source::Mapped {
                expr,
                inputs,
                params,
                body,
                tys,
                ..
            } => {
                let mut xs = Vec::with_capacity(inputs.len());
                for s in inputs {
                    xs.push(self.element(s, i)?);
                }
                // `emit --stage clif` labels the fused map's instructions
                // with its term, inside the consumer's loop.
                self.labelled(
                    || crate::annotate::one_line(expr),
                    |t| t.apply(params, body, xs, tys),
                )
            }
            // Every element read is in range: `0 ≤ i < n`.
            Source::Iota(n) => {
                if let Some(bound) = self.range_sizes.get(n).cloned() {
                    self.below.insert(i, bound);
                }
                Ok(Values::Int(i))
            }
            Source::Shifted { inner, offset, .. } => {
                let i = match offset {
                    Some(k) => self.b.ins().iadd(i, *k),
                    None => i,
                };
                self.element(inner, i)
            }
            Source::Scan {
                state,
                vars,
                params,
                body,
                tys,
                input,
                before,
                ..
            } => {
                let current: Vec<Value> = vars.iter().map(|v| self.b.use_var(*v)).collect();
                let acc = state.rebuild(&mut current.into_iter());
                let x = self.element(input, i)?;
                let next = self.apply(params, body, vec![acc.clone(), x], tys)?;
                let flat = next.to_vec();
                if flat.len() != vars.len() {
                    return Err(JitError::Internal("a scan's state changes layout".into()));
                }
                for (var, v) in vars.iter().zip(flat) {
                    self.b.def_var(*var, v);
                }
                Ok(if *before { acc } else { next })
            }
            Source::OneHot { at, hit, miss, .. } => {
                let miss = self.entry_copy(*miss);
                if let Some(Side::Second) = self.interior.get(&(s as *const Source<'_> as usize)) {
                    return Ok(Values::Real(miss));
                }
                let hit = self.entry_copy(*hit);
                let is_at = self.b.ins().icmp_imm_s(IntCC::Equal, i, *at);
                Ok(Values::Real(self.b.ins().select(is_at, hit, miss)))
            }
            Source::Concat { parts, split, .. }
                if self
                    .interior
                    .contains_key(&(s as *const Source<'_> as usize)) =>
            {
                match self.interior[&(s as *const Source<'_> as usize)] {
                    Side::First => self.element(&parts.0, i),
                    Side::Second => {
                        let j = self.b.ins().isub(i, *split);
                        self.element(&parts.1, j)
                    }
                }
            }
            Source::Concat { parts, split, .. } => {
                let in_first = self.b.ins().icmp(IntCC::SignedLessThan, i, *split);
                let split = *split;
                self.branches(
                    in_first,
                    "parts of `concat` differ in layout",
                    &mut |t| t.element(&parts.0, i),
                    &mut |t| {
                        let j = t.b.ins().isub(i, split);
                        t.element(&parts.1, j)
                    },
                )
            }
        }
    }
}

/// Where an array operation's elements come from (see
/// [`Translator::source`]).
pub(super) enum Source<'e> {
    /// An array in memory and its element stride in bytes.
    Array(ArrayVal, Value),
    /// `map`/`map2 (params. body) inputs`, computed per element.
    Mapped {
        expr: &'e Expr,
        inputs: Vec<Source<'e>>,
        params: &'e [Param],
        body: &'e Expr,
        tys: Vec<Type>,
        len: Value,
    },
    /// `iota(n)`, of length `n`: element `i` is `i`.
    Iota(Value),
    /// `shift1L`/`shift1R`/`take` of a source computed in the loop: element
    /// `i` is the inner source's element `i + offset` (`offset` is 1 for a
    /// non-empty `shift1L`, absent for `shift1R` and `take`).
    Shifted {
        inner: Box<Source<'e>>,
        offset: Option<Value>,
        len: Value,
    },
    /// `shift1L`/`shift1R (scanl (params. body) z A)` read in order: the
    /// state (reals, in `vars`, laid out as `state`) is updated at each
    /// element; element `i` is the state after (`shift1L`) or before
    /// (`shift1R`, `before`) the step on `A[i]`.
    Scan {
        state: Values,
        vars: Vec<cranelift_frontend::Variable>,
        params: &'e [Param],
        body: &'e Expr,
        tys: [Type; 2],
        input: Box<Source<'e>>,
        before: bool,
        len: Value,
    },
    /// `concat(A, B)`: element `i` is `A[i]` for `i < split` (the length
    /// of `A`), else `B[i - split]`.
    Concat {
        parts: Box<(Source<'e>, Source<'e>)>,
        split: Value,
        len: Value,
    },
    /// `map (p. if p == at then hit else miss) iota(len)`, `hit` and
    /// `miss` reals computed before the loop: element `i` is `hit` if
    /// `i == at`, else `miss`.
    OneHot {
        at: i64,
        hit: Value,
        miss: Value,
        len: Value,
    },
}

impl Source<'_> {
    pub(super) fn len(&self) -> Value {
        match self {
            Source::Array(a, _) => a.len,
            Source::Iota(n) | Source::OneHot { len: n, .. } => *n,
            Source::Mapped { len, .. }
            | Source::Shifted { len, .. }
            | Source::Concat { len, .. }
            | Source::Scan { len, .. } => *len,
        }
    }
}

/// Whether `e`, read by a loop through [`Translator::source`], has its
/// elements computed in that loop (an `iota`, a `map`/`map2`, a `concat`,
/// a shift or `take` of such) and none of them can fail: the bodies of
/// the maps involved only compute with reals (no indexing, no array
/// operation, no call). The arrays they read may be anything: those are
/// computed, and checked, before the loop. A loop that skips some
/// elements (a shift, a `take`) may then skip them without hiding an
/// error.
pub(crate) fn fused_elements_cannot_fail(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Builtin(Builtin::Iota, _) => true,
        ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) => {
            let ExprKind::Lambda(params, body) = &f.kind else {
                return false;
            };
            params.len() == op.fn_arity() && cannot_fail(body) && args.iter().all(read_safely)
        }
        ExprKind::Builtin(Builtin::Concat, parts) => parts.iter().all(read_safely),
        ExprKind::Builtin(Builtin::Shift1L | Builtin::Shift1R, args) => {
            args.iter().all(read_safely)
        }
        ExprKind::Builtin(Builtin::Take, args) => args.get(1).is_some_and(read_safely),
        _ => false,
    }
}

/// Whether the elements of `e`, an array a fused source reads, cannot fail
/// as the loop reads them: stored before the loop (loads), or computed in
/// it by a source whose elements cannot fail.
pub(super) fn read_safely(e: &Expr) -> bool {
    let fused = matches!(
        e.kind,
        ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..)
            | ExprKind::Builtin(
                Builtin::Iota
                    | Builtin::Concat
                    | Builtin::Shift1L
                    | Builtin::Shift1R
                    | Builtin::Take,
                _
            )
    );
    !fused || fused_elements_cannot_fail(e)
}
