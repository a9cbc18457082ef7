//! The values a loop carries from one iteration to the next, and the
//! workspace marks that let each iteration release its temporaries.
//!
//! A [`Carried`] value keeps its reals (and the views of its arrays) in
//! Cranelift variables and each of its arrays in the one of two buffers it
//! does not occupy, so a loop's workspace does not grow with its trip count;
//! every fold, scan and `revfold` carries its accumulator so.

use crate::lower::{unsupported, Translator};
use crate::values::{load, Shape, Values};
use crate::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, Value, ValueDef};
use cranelift_frontend::Variable;
use gradlift_lang::syntax::Type;

/// A loop-carried value. Reals and the views of arrays live in Cranelift
/// variables; each array of the value (each array component of a tuple,
/// with its inner arrays) is copied at each update into the one of its two
/// buffers it does not occupy, so the step's temporaries can be released.
/// Reals thus stay in registers from one iteration to the next. An update
/// that leaves an array as it is (in some branch of an `if`) keeps it
/// where it is, without a copy: the buffers then swap only when the new
/// array was written (a comparison of pointers at run time).
pub(crate) struct Carried {
    template: Values,
    vars: Vec<Variable>,
    /// For each array of the value, in the order of a walk of `template`:
    /// its layout, the buffer the next update writes, the other one.
    buffers: Vec<(Shape, Variable, Variable)>,
}

impl Carried {
    /// The variables holding the value.
    pub(crate) fn vars(&self) -> &[Variable] {
        &self.vars
    }

    /// Whether the value holds arrays, kept in buffers.
    pub(crate) fn has_buffers(&self) -> bool {
        !self.buffers.is_empty()
    }
}

/// Where a value is put as it is computed (see [`Translator::lower_to`]).
pub(crate) enum Dest {
    /// Anywhere: SSA values, arrays in the workspace.
    Value,
    /// Component by component.
    Tuple(Vec<Dest>),
    /// An array stored at the address, with the layout; or, if it is the
    /// array whose view (pointer, length) is the third field (the current
    /// value of a loop's accumulator, which the step does not write), that
    /// array as it is.
    At(Value, Shape, (Value, Value)),
}

/// The addresses of the arrays of `d`, in walk order.
fn dest_addresses(d: &Dest, out: &mut Vec<Value>) {
    match d {
        Dest::Tuple(ds) => ds.iter().for_each(|d| dest_addresses(d, out)),
        Dest::At(at, _, _) => out.push(*at),
        Dest::Value => {}
    }
}

/// The pointers of the arrays of `v`, outermost only, in walk order.
fn array_views(v: &Values, out: &mut Vec<Value>) {
    match v {
        Values::Tuple(vs) => vs.iter().for_each(|v| array_views(v, out)),
        Values::Array(a) => out.push(a.ptr),
        Values::Real(_) | Values::Int(_) | Values::Bool(_) => {}
    }
}

/// The types of the arrays of a value of type `ty`, outermost only, in
/// walk order (as [`array_leaves`]).
fn array_leaf_types<'t>(ty: &'t Type, out: &mut Vec<&'t Type>) {
    match ty {
        Type::Tuple(ts) => ts.iter().for_each(|t| array_leaf_types(t, out)),
        Type::Array(..) => out.push(ty),
        _ => {}
    }
}

/// The layouts of the arrays of `v`, outermost only, in walk order.
fn array_leaves(v: &Values, out: &mut Vec<Shape>) {
    match v {
        Values::Tuple(vs) => vs.iter().for_each(|v| array_leaves(v, out)),
        Values::Array(a) => out.push(Shape::Array(a.len, Box::new(a.elem.clone()))),
        Values::Real(_) | Values::Int(_) | Values::Bool(_) => {}
    }
}

/// Tells `guard` that the arrays of `now` have the lengths of those of
/// `start` (the same layout).
fn same_lengths(guard: &mut crate::guard::Guard, start: &Values, now: &Values) {
    fn shapes(guard: &mut crate::guard::Guard, start: &Shape, now: &Shape) {
        match (start, now) {
            (Shape::Tuple(xs), Shape::Tuple(ys)) => {
                xs.iter().zip(ys).for_each(|(x, y)| shapes(guard, x, y))
            }
            (Shape::Array(n, x), Shape::Array(m, y)) => {
                guard.same_length(*n, *m);
                shapes(guard, x, y);
            }
            _ => {}
        }
    }
    match (start, now) {
        (Values::Tuple(xs), Values::Tuple(ys)) => xs
            .iter()
            .zip(ys)
            .for_each(|(x, y)| same_lengths(guard, x, y)),
        (Values::Array(a), Values::Array(b)) => {
            guard.same_length(a.len, b.len);
            shapes(guard, &a.elem, &b.elem);
        }
        _ => {}
    }
}

impl Translator<'_, '_> {
    /// A loop-carried value starting at `init`, of type `ty`.
    pub fn carried(&mut self, init: &Values, ty: &Type) -> Result<Carried, JitError> {
        if init.shape().is_none() {
            return unsupported("a loop-carried condition");
        }
        let vars = self.variables(init);
        let mut leaves = Vec::new();
        array_leaves(init, &mut leaves);
        let mut leaf_types = Vec::new();
        array_leaf_types(ty, &mut leaf_types);
        if leaf_types.len() != leaves.len() {
            return Err(JitError::Internal(
                "a loop-carried value not of its type".into(),
            ));
        }
        let mut buffers = Vec::with_capacity(leaves.len());
        for (shape, ty) in leaves.into_iter().zip(leaf_types) {
            let bytes = self.bytes(&shape)?;
            let counted = self.counts().bytes(ty);
            let exact = self.exact_bytes(&shape);
            let first = self.alloc(bytes, counted.clone(), exact.clone());
            let second = self.alloc(bytes, counted, exact);
            let (a, b) = (
                self.b.declare_var(types::I64),
                self.b.declare_var(types::I64),
            );
            self.b.def_var(a, first);
            self.b.def_var(b, second);
            buffers.push((shape, a, b));
        }
        Ok(Carried {
            template: init.clone(),
            vars,
            buffers,
        })
    }

    /// One variable per flattened value of `v`, holding it.
    pub(crate) fn variables(&mut self, v: &Values) -> Vec<Variable> {
        v.to_vec()
            .into_iter()
            .map(|x| {
                let ty = self.b.func.dfg.value_type(x);
                let var = self.b.declare_var(ty);
                self.b.def_var(var, x);
                var
            })
            .collect()
    }

    /// The current value.
    ///
    /// Its arrays' lengths are those of the start at every iteration:
    /// each update stores its arrays into buffers of the start's layout,
    /// checking their shapes against it (`ShapeMismatch`), or keeps the
    /// current ones. The guard (`guard.rs`) learns so.
    pub fn get(&mut self, c: &Carried) -> Values {
        let current: Vec<Value> = c.vars.iter().map(|v| self.b.use_var(*v)).collect();
        let v = c.template.rebuild(&mut current.into_iter());
        same_lengths(&mut self.guard, &c.template, &v);
        v
    }

    /// Makes `v` the value, copying its arrays out of the temporaries.
    pub fn set(&mut self, c: &Carried, v: &Values) -> Result<(), JitError> {
        let dest = self.dest(c);
        let v = self.put(v, &dest)?;
        self.take_value(c, &v, &dest)
    }

    /// Makes the value's arrays the loop's own: copies them into their
    /// spare buffers (the start of a fold may be an array the step reads
    /// too, or an argument, which a step writing in place must not touch).
    pub fn own(&mut self, c: &Carried) -> Result<(), JitError> {
        fn copy(t: &mut Translator<'_, '_>, v: &Values, dest: &Dest) -> Result<Values, JitError> {
            match (v, dest) {
                (Values::Tuple(vs), Dest::Tuple(ds)) if vs.len() == ds.len() => Ok(Values::Tuple(
                    vs.iter()
                        .zip(ds)
                        .map(|(v, d)| copy(t, v, d))
                        .collect::<Result<_, _>>()?,
                )),
                (_, Dest::At(at, shape, _)) => {
                    t.store(*at, v, shape)?;
                    Ok(load(t.b, *at, shape))
                }
                (_, Dest::Value) => Ok(v.clone()),
                _ => Err(JitError::Internal("a carried value changes layout".into())),
            }
        }
        let dest = self.dest(c);
        let v = self.get(c);
        let v = copy(self, &v, &dest)?;
        self.take_value(c, &v, &dest)
    }

    /// Makes the value the one `write` computes into the destination it is
    /// given (see [`Translator::lower_to`]): each array straight into its
    /// spare buffer (the value before the current one, which nothing reads
    /// any more), so a body ending in a `map` builds the next array in
    /// place.
    pub fn set_written(
        &mut self,
        c: &Carried,
        write: &mut dyn FnMut(&mut Self, &Dest) -> Result<Values, JitError>,
    ) -> Result<(), JitError> {
        let dest = self.dest(c);
        let v = write(self, &dest)?;
        self.take_value(c, &v, &dest)
    }

    /// Where the next value goes: its arrays into their spare buffers,
    /// unless they are the current ones.
    fn dest(&mut self, c: &Carried) -> Dest {
        /// `flat` is the index in `c.vars` of `v`'s first value. Only the
        /// views of the arrays are read (a read of a real here would make
        /// it live through any loop in between).
        fn walk(
            t: &mut Translator<'_, '_>,
            v: &Values,
            c: &Carried,
            k: &mut usize,
            flat: &mut usize,
        ) -> Dest {
            match v {
                Values::Tuple(vs) => {
                    Dest::Tuple(vs.iter().map(|v| walk(t, v, c, k, flat)).collect())
                }
                Values::Array(a) => {
                    let (shape, next, _) = &c.buffers[*k];
                    *k += 1;
                    let ptr = t.b.use_var(c.vars[*flat]);
                    let len = t.b.use_var(c.vars[*flat + 1]);
                    let mut inner = Vec::new();
                    a.elem.flatten(&mut inner);
                    *flat += 2 + inner.len();
                    Dest::At(t.b.use_var(*next), shape.clone(), (ptr, len))
                }
                Values::Real(_) | Values::Int(_) | Values::Bool(_) => {
                    *flat += 1;
                    Dest::Value
                }
            }
        }
        walk(self, &c.template, c, &mut 0, &mut 0)
    }

    /// Puts `v` where `dest` says: its arrays are copied there, except an
    /// array that is the accumulator's current one, which stays where it
    /// is (known when lowering, or checked at run time for a view merged
    /// from branches).
    pub(crate) fn put(&mut self, v: &Values, dest: &Dest) -> Result<Values, JitError> {
        match (v, dest) {
            (_, Dest::Value) => Ok(v.clone()),
            (Values::Tuple(vs), Dest::Tuple(ds)) if vs.len() == ds.len() => Ok(Values::Tuple(
                vs.iter()
                    .zip(ds)
                    .map(|(v, d)| self.put(v, d))
                    .collect::<Result<_, _>>()?,
            )),
            (Values::Array(a), Dest::At(_, _, (ptr, len)))
                if self.same(a.ptr, *ptr) && self.same(a.len, *len) =>
            {
                // The accumulator's array, unchanged: kept where it is.
                Ok(v.clone())
            }
            (Values::Array(a), Dest::At(at, shape, (ptr, len)))
                if matches!(
                    self.b
                        .func
                        .dfg
                        .value_def(self.b.func.dfg.resolve_aliases(a.ptr)),
                    ValueDef::Param(..)
                ) =>
            {
                // A view merged from branches (of `if`): the current array
                // in some of them, perhaps. Checked at run time; copied
                // only if it is not.
                let same_ptr = self.b.ins().icmp(IntCC::Equal, a.ptr, *ptr);
                let same_len = self.b.ins().icmp(IntCC::Equal, a.len, *len);
                let same = self.b.ins().band(same_ptr, same_len);
                let (copy, merge) = (self.b.create_block(), self.b.create_block());
                let kept = self.b.append_block_param(merge, types::I64);
                self.b
                    .ins()
                    .brif(same, merge, &[BlockArg::Value(a.ptr)], copy, &[]);
                self.b.switch_to_block(copy);
                self.region(|t| t.store(*at, v, shape))?;
                self.b.ins().jump(merge, &[BlockArg::Value(*at)]);
                self.b.switch_to_block(merge);
                Ok(load(self.b, kept, shape))
            }
            (_, Dest::At(at, shape, _)) => {
                self.store(*at, v, shape)?;
                Ok(load(self.b, *at, shape))
            }
            _ => Err(JitError::Internal("a carried value changes layout".into())),
        }
    }

    /// Makes `v`, whose arrays are in the spare buffers, the value; the
    /// buffers it left become the spare ones.
    fn take_value(&mut self, c: &Carried, v: &Values, dest: &Dest) -> Result<(), JitError> {
        let mut arrays = Vec::with_capacity(c.buffers.len());
        array_views(v, &mut arrays);
        let mut targets = Vec::with_capacity(c.buffers.len());
        dest_addresses(dest, &mut targets);
        if arrays.len() != c.buffers.len() || targets.len() != c.buffers.len() {
            return Err(JitError::Internal("a carried value changes layout".into()));
        }
        for (((_, next, other), ptr), written) in c.buffers.iter().zip(arrays).zip(targets) {
            // `written` is the spare buffer the step was given.
            let spare = self.b.use_var(*other);
            if self.same(ptr, written) {
                self.b.def_var(*next, spare);
                self.b.def_var(*other, written);
            } else {
                // Written into `next`, or kept where it was: known at run
                // time only.
                let was_written = self.b.ins().icmp(IntCC::Equal, ptr, written);
                let new_next = self.b.ins().select(was_written, spare, written);
                let new_other = self.b.ins().select(was_written, written, spare);
                self.b.def_var(*next, new_next);
                self.b.def_var(*other, new_other);
            }
        }
        let flat = v.to_vec();
        if flat.len() != c.vars.len() {
            return Err(JitError::Internal("a carried value changes layout".into()));
        }
        for (var, x) in c.vars.iter().zip(flat) {
            self.b.def_var(*var, x);
        }
        Ok(())
    }

    /// Whether `a` and `b` are one SSA value (through the aliases the
    /// variables' SSA construction leaves).
    fn same(&self, a: Value, b: Value) -> bool {
        let dfg = &self.b.func.dfg;
        dfg.resolve_aliases(a) == dfg.resolve_aliases(b)
    }

    /// Makes `v` the value without copying it: `v` must not live in the
    /// temporaries of the current iteration.
    pub fn set_view(&mut self, c: &Carried, v: &Values) -> Result<(), JitError> {
        let flat = v.to_vec();
        if flat.len() != c.vars.len() {
            return Err(JitError::Internal("a carried value changes layout".into()));
        }
        for (var, x) in c.vars.iter().zip(flat) {
            self.b.def_var(*var, x);
        }
        Ok(())
    }

    /// The workspace's bump pointer, to release a step's temporaries with
    /// [`Translator::release`].
    pub fn mark(&mut self) -> Mark {
        Mark {
            top: self.b.use_var(self.top),
            depth: self.usage.depth(),
        }
    }

    /// Releases everything allocated since `mark`.
    pub fn release(&mut self, mark: Mark) {
        self.b.def_var(self.top, mark.top);
        self.usage.release(mark.depth);
    }
}

/// The workspace's state to go back to: the bump pointer, and the depth
/// of the allocations counted ([`crate::workspace::Usage`]).
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    top: Value,
    depth: usize,
}
