//! Peeled loops: a loop whose sources test its index where the answer is
//! the same for all but a few iterations at the start or the end (a
//! `concat` with a part of constant length, a one-hot) runs its interior
//! with the tests decided, and a copy of the body as it is for the edges.

use super::*;

impl Translator<'_, '_> {
    /// [`Translator::for_range_out`], with the body emitted twice when
    /// there is an `interior`: once for the indices in `lo..hi`, with the
    /// tests the sources make on the index decided (`Translator::interior`),
    /// and once, as it is, for the others, at the edges. The iterations run
    /// in order, `0` to `n - 1`:
    ///
    /// ```text
    /// edge(i):  i == lo && lo < hi ? main(i) : (body; i + 1 < n ? edge(i + 1) : exit)
    /// main(i):  body decided; i + 1 < hi ? main(i + 1) : (hi < n ? edge(hi) : exit)
    /// ```
    pub(super) fn for_range_peeled(
        &mut self,
        n: Value,
        results: &[cranelift_frontend::Variable],
        interior: Option<Interior>,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        self.rotated_loop(n, results, interior, true, true, body)
    }

    /// [`Translator::for_range_out`] for a loop that almost always runs
    /// once (the chunks of a `reduce` in lanes, `fold.rs`): it makes no
    /// copies of the values it reads from before it (`LoopEntry`), whose
    /// stores and loads would cost more than the spills they move; loops
    /// inside it copy from before it directly.
    pub(super) fn for_range_uncopied(
        &mut self,
        n: Value,
        results: &[cranelift_frontend::Variable],
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        self.rotated_loop(n, results, None, false, true, body)
    }

    /// [`Translator::for_range_out`] for the tail of a `reduce` in lanes
    /// (fewer than `LANES` iterations, `fold.rs`), whose result is
    /// combined with the lanes' right after it: no copies of the values it
    /// reads from before it, and none of its result (`Translator::pin`).
    /// Either would cost a store and a load at each entry, more than a
    /// loop of at most three iterations can gain.
    pub(super) fn for_range_short(
        &mut self,
        n: Value,
        results: &[cranelift_frontend::Variable],
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        self.rotated_loop(n, results, None, false, false, body)
    }

    fn rotated_loop(
        &mut self,
        n: Value,
        results: &[cranelift_frontend::Variable],
        interior: Option<Interior>,
        copies: bool,
        pin: bool,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        let index = self.b.declare_var(types::I64);
        let zero = self.iconst(0);
        self.b.def_var(index, zero);
        let (block, exit) = (self.b.create_block(), self.b.create_block());
        let outs =
            |t: &mut Self| -> Vec<Value> { results.iter().map(|v| t.b.use_var(*v)).collect() };
        let args =
            |vs: &[Value]| -> Vec<BlockArg> { vs.iter().map(|v| BlockArg::Value(*v)).collect() };
        // Rotated: one test before the first iteration, then one at the
        // end of each, branching back.
        let any = self.b.ins().icmp(IntCC::SignedLessThan, zero, n);
        let before = outs(self);
        let branch = self.b.ins().brif(any, block, &[], exit, &args(&before));
        if copies {
            self.loops.push(crate::lower::LoopEntry {
                first: block,
                branch,
                copies: Default::default(),
            });
        }
        // The loop's own copy of its bound (see `LoopEntry`).
        let n = if copies { self.entry_copy(n) } else { n };
        self.b.switch_to_block(block);
        let i = self.b.use_var(index);
        if let Some(interior) = &interior {
            let r = self.peeled(interior, index, n, block, exit, results, body);
            if r.is_err() && copies {
                self.loops.pop();
            }
            r?;
        }
        let r = self.repeated("a loop's step", |t| body(t, i));
        if copies {
            self.loops.pop();
        }
        r?;
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.def_var(index, next);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, n);
        let outs = outs(self);
        self.b.ins().brif(more, block, &[], exit, &args(&outs));
        self.b.switch_to_block(exit);
        // Every parameter before any instruction in the block.
        let params: Vec<Value> = outs
            .iter()
            .map(|x| {
                let ty = self.b.func.dfg.value_type(*x);
                self.b.append_block_param(exit, ty)
            })
            .collect();
        for (v, p) in results.iter().zip(params) {
            let ty = self.b.func.dfg.value_type(p);
            let p = if pin && ty == types::F64 {
                self.pin(p)
            } else {
                p
            };
            self.b.def_var(*v, p);
        }
        Ok(())
    }

    /// The interior of a peeled loop (see [`Translator::for_range_peeled`]),
    /// emitted from the edge block `edge` (the current block, where the
    /// index is `i`): the test for entering it, and its own rotated loop.
    /// Leaves the builder in the block of the edge iterations' body.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn peeled(
        &mut self,
        interior: &Interior,
        index: cranelift_frontend::Variable,
        n: Value,
        edge: cranelift_codegen::ir::Block,
        exit: cranelift_codegen::ir::Block,
        results: &[cranelift_frontend::Variable],
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        let (main, after, edge_body) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let (lo, hi) = (self.entry_copy(interior.lo), self.entry_copy(interior.hi));
        let enter = self.entry_copy(interior.enter);
        let i = self.b.use_var(index);
        let at_lo = self.b.ins().icmp(IntCC::Equal, i, lo);
        let go = self.b.ins().band(at_lo, enter);
        self.b.ins().brif(go, main, &[], edge_body, &[]);
        self.b.switch_to_block(main);
        let j = self.b.use_var(index);
        for (node, side) in &interior.sides {
            self.interior.insert(*node, *side);
        }
        let r = self.repeated("a loop's step", |t| body(t, j));
        for (node, _) in &interior.sides {
            self.interior.remove(node);
        }
        r?;
        let next = self.b.ins().iadd_imm_s(j, 1);
        self.b.def_var(index, next);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, hi);
        self.b.ins().brif(more, main, &[], after, &[]);
        self.b.switch_to_block(after);
        let rest = self.b.ins().icmp(IntCC::SignedLessThan, hi, n);
        let outs: Vec<BlockArg> = results
            .iter()
            .map(|v| BlockArg::Value(self.b.use_var(*v)))
            .collect();
        self.b.ins().brif(rest, edge, &[], exit, &outs);
        self.b.switch_to_block(edge_body);
        Ok(())
    }

    /// The interior of a loop over `n` elements reading `sources` (element
    /// `i` at iteration `i`, or at iteration `n - 1 - i` if `reversed`):
    /// the iterations where every `concat` with a part of constant length
    /// reads the same part, and every one-hot source its zero — all but a
    /// few at the start and the end. `None` if no source tests the index
    /// so. The bounds are computed here, before the loop.
    pub(super) fn interior(
        &mut self,
        sources: &[&Source<'_>],
        n: Value,
        reversed: bool,
    ) -> Option<Interior> {
        // A short loop is not worth a second copy of its body.
        if self.constant(n).is_some_and(|n| n <= MIN_PEELED_LEN) {
            return None;
        }
        let mut found = Vec::new();
        for s in sources {
            boundaries(s, &mut Vec::new(), &mut found, self);
        }
        if found.is_empty() {
            return None;
        }
        let zero = self.iconst(0);
        let (mut lo, mut hi) = (zero, n);
        let mut sides = Vec::with_capacity(found.len());
        for b in found {
            // The decision changes at element `split - offset` of the loop.
            let mut at = b.split;
            for (x, add) in b.offset {
                at = if add {
                    self.b.ins().isub(at, x)
                } else {
                    self.b.ins().iadd(at, x)
                };
            }
            if b.starts {
                lo = self.b.ins().smax(lo, at);
            } else {
                hi = self.b.ins().smin(hi, at);
            }
            sides.push((b.node, b.side));
        }
        // 0 <= lo <= hi <= n.
        let lo = self.b.ins().smin(lo, n);
        let hi = self.b.ins().smax(hi, lo);
        let (lo, hi) = if reversed {
            (self.b.ins().isub(n, hi), self.b.ins().isub(n, lo))
        } else {
            (lo, hi)
        };
        let enter = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        Some(Interior {
            lo,
            hi,
            enter,
            sides,
        })
    }
}

/// The longest loop of a constant length that is not peeled.
pub(super) const MIN_PEELED_LEN: i64 = 32;

/// One-hot sources whose `at` is below this are decided in the interior of
/// a peeled loop (those beyond are tested at every element): the edge runs
/// `at + 1` iterations.
pub(super) const MAX_ONE_HOT_EDGE: i64 = 8;

/// Which way a test on the index goes in the interior of a peeled loop
/// (see [`Translator::for_range_peeled`]): a `concat` reads its first
/// part or its second; a one-hot source is its `miss` (`Second`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    First,
    Second,
}

/// The interior `lo..hi` of a peeled loop's iterations (`enter` is
/// `lo < hi`) and the sides its sources' tests take there, by the
/// address of the source.
pub(super) struct Interior {
    pub(super) lo: Value,
    pub(super) hi: Value,
    pub(super) enter: Value,
    pub(super) sides: Vec<(usize, Side)>,
}

/// A test a source makes on the index of the loop reading it: the
/// element `i` of the loop takes `side` for every `i >= split - offset`
/// (`starts`), or every `i < split - offset`; `offset` is a sum of values
/// added (`true`) or subtracted.
pub(super) struct Boundary {
    pub(super) node: usize,
    pub(super) split: Value,
    pub(super) offset: Vec<(Value, bool)>,
    pub(super) starts: bool,
    pub(super) side: Side,
}

/// The tests on the index that `s` makes and a peeled loop decides: those
/// of a `concat` one of whose parts has a constant length (the test
/// changes near the start of the loop, or near its end) and of one-hot
/// sources. `offset` is what is added to the loop's index to get `s`'s.
pub(super) fn boundaries(
    s: &Source<'_>,
    offset: &mut Vec<(Value, bool)>,
    out: &mut Vec<Boundary>,
    t: &mut Translator<'_, '_>,
) {
    let node = s as *const Source<'_> as usize;
    match s {
        Source::Array(..) | Source::Iota(_) => {}
        Source::OneHot { at, .. } if *at >= MAX_ONE_HOT_EDGE => {}
        Source::Mapped { inputs, .. } => {
            for s in inputs {
                boundaries(s, offset, out, t);
            }
        }
        Source::Scan { input, .. } => boundaries(input, offset, out, t),
        Source::Shifted {
            inner, offset: k, ..
        } => {
            if let Some(k) = k {
                offset.push((*k, true));
            }
            boundaries(inner, offset, out, t);
            if k.is_some() {
                offset.pop();
            }
        }
        Source::Concat { parts, split, .. } => {
            let first = t.constant(parts.0.len()).is_some();
            let second = t.constant(parts.1.len()).is_some();
            if first != second {
                out.push(Boundary {
                    node,
                    split: *split,
                    offset: offset.clone(),
                    starts: first,
                    side: if first { Side::Second } else { Side::First },
                });
            }
            boundaries(&parts.0, offset, out, t);
            offset.push((*split, false));
            boundaries(&parts.1, offset, out, t);
            offset.pop();
        }
        Source::OneHot { at, .. } => {
            let split = t.iconst(*at + 1);
            out.push(Boundary {
                node,
                split,
                offset: offset.clone(),
                starts: true,
                side: Side::Second,
            });
        }
    }
}
