//! `map` and `map2`: the loop that stores the elements, the folds that ride
//! along it (horizontal fusion, chosen in `horizontal.rs`), and the folds
//! of the result that ride along a map of the result.

use super::*;

impl Translator<'_, '_> {
    /// `map`/`map2 (params. body) args`, written to fresh workspace memory
    /// or, with `dest` (an address and the shape of an array there), into
    /// `dest` after checking that the lengths agree.
    pub(super) fn map_into(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        dest: Option<(Value, &Shape)>,
    ) -> Result<Values, JitError> {
        let (array, _) = self.map_folding(params, body, args, dest, &mut |_, _| Ok(Vec::new()))?;
        Ok(array)
    }

    /// [`Translator::map_into`], with the folds `folds` makes from the
    /// map's [`Mapping`] computed in the map's loop: the array and the
    /// folds' results.
    #[allow(clippy::type_complexity)]
    pub(super) fn map_folding<'e>(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        dest: Option<(Value, &Shape)>,
        folds: &mut dyn FnMut(&mut Self, &Mapping<'_>) -> Result<Vec<Fold<'e>>, JitError>,
    ) -> Result<(Values, Vec<Values>), JitError> {
        let m = self.mapping(params, body, args)?;
        let (ptr, stride) = match dest {
            Some((at, want)) => {
                let own = Shape::Array(m.len, Box::new(m.shape.clone()));
                self.check_same_shape(&own, want, Status::ShapeMismatch)?;
                (at, unchecked_bytes(self.b, &m.shape))
            }
            None => {
                let counted = self.counts().array(&m.size, &m.out_ty);
                self.alloc_array(m.len, &m.shape, counted)?
            }
        };
        let folds = folds(self, &m)?;
        self.write_mapping_with(&m, ptr, stride, &folds)?;
        let results = self.fold_results(&folds);
        let array = Values::Array(ArrayVal {
            ptr,
            len: m.len,
            elem: m.shape,
        });
        Ok((array, results))
    }

    /// [`Translator::map_into`] at `dest`, with the folds of `waiting` whose
    /// array the map's loop reads in full, in order, computed in that loop:
    /// their parts and values.
    pub(super) fn map_into_riding(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        dest: (Value, &Shape),
        waiting: &[TupleRider<'_>],
    ) -> Result<Vec<(usize, Values)>, JitError> {
        let mut parts = Vec::new();
        let (_, results) = self.map_folding(params, body, args, Some(dest), &mut |t, m| {
            let mut folds = Vec::new();
            for r in waiting {
                let Some(Values::Array(v)) = t.env.get(r.array).cloned() else {
                    continue;
                };
                let Some(read) = m.sources.iter().find_map(|s| reads_all_of(s, v.ptr, t)) else {
                    continue;
                };
                let tys = [r.ty.clone(), r.elem.clone()];
                let (a, stride) = read;
                folds.push(t.fold_from(r.params, r.body, r.start, tys, Reads::Array(a, stride))?);
                parts.push(r.part);
            }
            Ok(folds)
        })?;
        Ok(parts.into_iter().zip(results).collect())
    }

    /// The values of `folds` after their loop.
    pub(super) fn fold_results(&mut self, folds: &[Fold<'_>]) -> Vec<Values> {
        folds
            .iter()
            .map(|f| match &f.in_place {
                Some(c) => self.get(c),
                None => {
                    let current: Vec<Value> = f.vars.iter().map(|v| self.b.use_var(*v)).collect();
                    f.start.rebuild(&mut current.into_iter())
                }
            })
            .collect()
    }

    /// The parts of a tuple that are folds of reals over an array variable
    /// (`reduce`/`foldl` without a schedule, whose function's body and
    /// start cannot fail): deferred, they may ride along a `map` among the
    /// parts that reads their array (prod's gradient: the product rides
    /// along the loop of the `map2` that reads the prefix products of the
    /// same array). A fold that cannot fail gives its value whenever it is
    /// computed, and the loop gives it the same elements in the same
    /// order: the result is bit for bit the same.
    pub(super) fn riding_folds<'e>(
        &mut self,
        es: &'e [Expr],
    ) -> Result<Vec<TupleRider<'e>>, JitError> {
        let maps = es
            .iter()
            .filter(|e| matches!(e.kind, ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..)))
            .count();
        let mut out = Vec::new();
        if maps == 0 {
            return Ok(out);
        }
        for (part, e) in es.iter().enumerate() {
            let ExprKind::ArrayOp(op @ (ArrayOp::Reduce | ArrayOp::Foldl(None)), f, args) = &e.kind
            else {
                continue;
            };
            if crate::horizontal::in_lanes(*op, f) {
                continue;
            }
            if self.computed.contains_key(&(e as *const Expr)) {
                // Computed already, in the loop of an earlier map.
                continue;
            }
            let ([start, array], ExprKind::Lambda(params, body)) = (args.as_slice(), &f.kind)
            else {
                continue;
            };
            let ExprKind::Var(name) = &array.kind else {
                continue;
            };
            if params.len() != 2 || !cannot_fail(body) || !cannot_fail(start) {
                continue;
            }
            let ty = self.type_of(start)?;
            let Type::Array(elem, _) = self.type_of(array)? else {
                continue;
            };
            if !matches!(self.shape_of_type(&ty, false), Ok(s) if s.reals_only()) {
                continue;
            }
            out.push(TupleRider {
                part,
                array: name,
                params,
                body,
                start,
                ty,
                elem: *elem,
            });
        }
        Ok(out)
    }

    /// A `map`/`map2` up to its loop: its sources (their arrays computed),
    /// its length and the layout of its elements.
    pub(super) fn mapping<'e>(
        &mut self,
        params: &'e [Param],
        body: &'e Expr,
        args: &'e [Expr],
    ) -> Result<Mapping<'e>, JitError> {
        // `write_mapping` reads its sources in order.
        let (tys, sources, len, size) = self.sources(args, true)?;
        let mark = self.typer.mark();
        for (p, t) in params.iter().zip(&tys) {
            bind_types(&mut self.typer, &p.pat, t);
        }
        let out_ty = self.type_of(body)?;
        self.typer.pop_to(mark);
        let shape = self.shape_of_type(&out_ty, false)?;
        Ok(Mapping {
            params,
            body,
            tys,
            out_ty,
            sources,
            len,
            size,
            shape,
        })
    }

    /// A `map`/`map2` stored in fresh workspace memory, with folds over
    /// its result computed in its loop (see `horizontal.rs`): the array
    /// and the folds' results.
    pub(crate) fn map_with_folds(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        riders: &[crate::horizontal::Rider<'_>],
    ) -> Result<(Values, Vec<Values>), JitError> {
        self.map_folding(params, body, args, None, &mut |t, m| {
            riders
                .iter()
                .map(|r| {
                    let Some((a, own_first)) = r.zip else {
                        let tys = [r.ty.clone(), m.out_ty.clone()];
                        return t.fold_from(r.params, r.body, r.start, tys, Reads::Own);
                    };
                    // `A`, an array of the map, has the map's length.
                    let Some(Values::Array(av)) = t.env.get(a).cloned() else {
                        return Err(JitError::Internal(format!("the array `{a}`")));
                    };
                    let Type::Array(a_ty, _) = t.type_of(&Expr::synth(ExprKind::Var(a.clone())))?
                    else {
                        return Err(JitError::Internal(format!("the type of `{a}`")));
                    };
                    let a_ty = *a_ty;
                    let pair = if own_first {
                        vec![m.out_ty.clone(), a_ty]
                    } else {
                        vec![a_ty, m.out_ty.clone()]
                    };
                    let tys = [r.ty.clone(), Type::Tuple(pair)];
                    let stride = unchecked_bytes(t.b, &av.elem);
                    let reads = Reads::Zip(av, stride, own_first);
                    t.fold_from(r.params, r.body, r.start, tys, reads)
                })
                .collect()
        })
    }

    /// The loop of a [`Mapping`], writing element `i` at `ptr + i·stride`.
    pub(super) fn write_mapping(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        stride: Value,
    ) -> Result<(), JitError> {
        self.write_mapping_with(m, ptr, stride, &[])
    }

    /// [`Translator::write_mapping`], also updating `folds` with each
    /// element written.
    pub(super) fn write_mapping_with(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        stride: Value,
        folds: &[Fold<'_>],
    ) -> Result<(), JitError> {
        // (An accumulator updated in place keeps its view.)
        let results: Vec<cranelift_frontend::Variable> = folds
            .iter()
            .filter(|f| f.in_place.is_none())
            .flat_map(|f| f.vars.iter().copied())
            .collect();
        if self.pair_mapping(m) {
            // Reals, `stride` 8 apart.
            return self.write_mapping_in_pairs(m, ptr, folds, &results);
        }
        let sources: Vec<&Source<'_>> = m.sources.iter().collect();
        let interior = self.interior(&sources, m.len, false);
        self.for_range_peeled(m.len, &results, interior, &mut |t, i| {
            // The element is written into the result (its arrays built
            // there directly where the body ends in a map): the body's
            // temporaries die with the iteration.
            t.write_element(m, ptr, stride, folds, i)?;
            Ok(())
        })
    }

    /// Element `i` of a [`Mapping`], written at `ptr + i·stride` (its
    /// arrays built there directly where the body ends in a map), and the
    /// steps of the `folds` riding along on it; the body's temporaries die
    /// with the element.
    pub(super) fn write_element(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        stride: Value,
        folds: &[Fold<'_>],
        i: Value,
    ) -> Result<(), JitError> {
        let mark = self.mark();
        let mut xs = Vec::new();
        for s in &m.sources {
            xs.push(self.element(s, i)?);
        }
        for ((p, v), ty) in m.params.iter().zip(xs).zip(&m.tys) {
            self.bind(&p.pat, v, ty)?;
        }
        let to = self.entry_copy(ptr);
        let at = self.element_addr(to, i, stride);
        self.lower_into(m.body, at, &m.shape)?;
        if !folds.is_empty() {
            let own = folds
                .iter()
                .any(|f| !matches!(f.reads, Reads::Array(..)))
                .then(|| load(self.b, at, &m.shape));
            self.step_folds(folds, i, own)?;
        }
        self.release(mark);
        Ok(())
    }

    /// One step of each of `folds` on element `i` of a map, whose value
    /// `own` is (present when a fold reads it).
    pub(super) fn step_folds(
        &mut self,
        folds: &[Fold<'_>],
        i: Value,
        own: Option<Values>,
    ) -> Result<(), JitError> {
        let t = self;
        for f in folds {
            let mut other = |a: &ArrayVal, stride: Value| {
                let ptr = t.entry_copy(a.ptr);
                let at = t.element_addr(ptr, i, stride);
                load(t.b, at, &a.elem)
            };
            let own = || own.clone().expect("loaded for the folds over the map");
            let y = match &f.reads {
                Reads::Array(a, stride) => other(a, *stride),
                Reads::Own => own(),
                Reads::Zip(a, stride, own_first) => {
                    let (p, q) = (own(), other(a, *stride));
                    Values::Tuple(if *own_first { vec![p, q] } else { vec![q, p] })
                }
            };
            if let Some(c) = &f.in_place {
                // The step rewrites the accumulator where it is.
                let acc = t.get(c);
                let Values::Array(current) = &acc else {
                    return Err(JitError::Internal("an in-place accumulator".into()));
                };
                let (to, shape) = (
                    current.ptr,
                    Shape::Array(current.len, Box::new(current.elem.clone())),
                );
                for ((p, v), ty) in f.params.iter().zip([acc.clone(), y]).zip(&f.tys) {
                    t.bind(&p.pat, v, ty)?;
                }
                t.lower_into(f.body, to, &shape)?;
                continue;
            }
            let current: Vec<Value> = f.vars.iter().map(|v| t.b.use_var(*v)).collect();
            let acc = f.start.rebuild(&mut current.into_iter());
            let next = t.apply(f.params, f.body, vec![acc, y], &f.tys)?;
            let next = next.to_vec();
            if next.len() != f.vars.len() {
                return Err(JitError::Internal("accumulator layout changes".into()));
            }
            for (var, v) in f.vars.iter().zip(next) {
                t.b.def_var(*var, v);
            }
        }
        Ok(())
    }
}

/// A `map`/`map2` whose loop is yet to run (see [`Translator::mapping`]).
pub(super) struct Mapping<'e> {
    pub(super) params: &'e [Param],
    pub(super) body: &'e Expr,
    pub(super) tys: Vec<Type>,
    /// The type of an element of the result.
    pub(super) out_ty: Type,
    pub(super) sources: Vec<Source<'e>>,
    pub(super) len: Value,
    /// The length as a size expression.
    pub(super) size: Size,
    pub(super) shape: Shape,
}

/// A fold that is a part of a tuple, waiting to ride along the loop of a
/// `map` among the parts (see [`Translator::riding_folds`]).
pub(super) struct TupleRider<'e> {
    pub(super) part: usize,
    pub(super) array: &'e gradlift_lang::Name,
    pub(super) params: &'e [Param],
    pub(super) body: &'e Expr,
    pub(super) start: &'e Expr,
    pub(super) ty: Type,
    pub(super) elem: Type,
}

/// The array (and its stride) whose address is `ptr`, when the loop over
/// `s` reads its element `i` at iteration `i` for every `i`: `s` is that
/// array, or a map or a carried scan that reads it so.
pub(super) fn reads_all_of(
    s: &Source<'_>,
    ptr: Value,
    t: &Translator<'_, '_>,
) -> Option<(ArrayVal, Value)> {
    match s {
        Source::Array(a, stride) => {
            let dfg = &t.b.func.dfg;
            (dfg.resolve_aliases(a.ptr) == dfg.resolve_aliases(ptr)).then(|| (a.clone(), *stride))
        }
        Source::Mapped { inputs, .. } => inputs.iter().find_map(|s| reads_all_of(s, ptr, t)),
        Source::Scan { input, .. } => reads_all_of(input, ptr, t),
        _ => None,
    }
}
