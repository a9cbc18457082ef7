//! Reverse rules of the array constructs, one module per construct, each
//! giving the forward and reverse sweeps in mathematics first.
//!
//! A rule receives the step's atoms and the cotangent `Z` of its result and
//! adds cotangents to the atoms through [`Deriver::add`]. Gradients of the
//! bodies of array operations come from [`Deriver::gradient`], the same
//! transform applied to the body (so nested operations work, §4 NAO).

pub(crate) mod arrays;
pub(crate) mod checkpoint;
pub(crate) mod cond;
pub(crate) mod fold;
pub(crate) mod histogram;
pub(crate) mod map;
pub(crate) mod scan;

use crate::adjoint::Adj;
use crate::direct::{AdResult, Arg, Deriver, Gradient, Sweep};
use crate::rules::fold::Monoid;
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

impl Deriver {
    /// Dispatches the reverse of an array operation with cotangent `z`
    /// (an atom of type `ty`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn array_op_backward(
        &mut self,
        sw: &mut Sweep,
        op: ArrayOp,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        states: Option<Name>,
        out: &Expr,
        ty: &Type,
        z: Expr,
    ) -> AdResult<()> {
        match (op, states) {
            (ArrayOp::Map | ArrayOp::Map2, _) => self.map_backward(sw, params, body, args, ty, z),
            (ArrayOp::Foldl(Some(schedule)), None)
                if !crate::rules::fold::is_known_monoid(
                    params,
                    body,
                    &self.constant_value(&args[0].0),
                ) =>
            {
                self.checkpoint_backward(
                    sw,
                    schedule,
                    params,
                    body,
                    &args[0],
                    crate::rules::checkpoint::Steps::Over(&args[1]),
                    ty,
                    z,
                )
            }
            (ArrayOp::Reduce | ArrayOp::Foldl(_), None) => {
                let unit = self.constant_value(&args[0].0);
                self.monoid_backward(sw, params, body, args, &unit, out, z)
            }
            (ArrayOp::Reduce | ArrayOp::Foldl(_), Some(states)) => {
                // A max or min kept its position (`ext.1`), not its states.
                let unit = self.constant_value(&args[0].0);
                match crate::rules::fold::known_monoid(params, body, &unit) {
                    Some(m @ (Monoid::Max | Monoid::Min)) => {
                        self.extremum_backward(sw, m == Monoid::Max, args, out, z, Some(&states))
                    }
                    _ => self.fold_backward(sw, params, body, args, &states, ty, z),
                }
            }
            (ArrayOp::Scanl, _) => self.scan_backward(sw, params, body, args, out, z, true),
            (ArrayOp::Scanr, _) => self.scan_backward(sw, params, body, args, out, z, false),
            (ArrayOp::While, Some(counted)) => {
                self.while_backward(sw, params, body, args, &counted, ty, z)
            }
            (ArrayOp::While, None) => unreachable!("the forward pass counts a loop's steps"),
            (ArrayOp::Revfold(_) | ArrayOp::Revwhile(_), _) => {
                Err(crate::direct::AdError::Unsupported {
                    what: format!("a `{}` (a Target form)", op.name()),
                    span: out.span,
                })
            }
        }
    }

    /// Component `k` of a gradient tuple of `len` components (a gradient of
    /// one component is not a tuple).
    pub(crate) fn component(g: Expr, k: usize, len: usize) -> Expr {
        if len == 1 {
            g
        } else {
            proj(g, k)
        }
    }

    /// Adds to each free variable `fv[j]` of a body the sum over the array
    /// `per_element` of component `offset + j` of its elements.
    pub(crate) fn add_free_sums(
        &mut self,
        sw: &mut Sweep,
        fv: &[(Name, Type)],
        per_element: &Expr,
        offset: usize,
        len: usize,
    ) {
        for (j, (n, t)) in fv.iter().enumerate() {
            let g = self.names.fresh("g");
            let part = Self::component(var(&g), offset + j, len);
            let parts = array_op(
                ArrayOp::Map,
                lambda(vec![pvar(&g)], part),
                vec![per_element.clone()],
            );
            let total = crate::adjoint::sum(t, parts, &mut self.names);
            self.add(sw, &var(n), t, Adj::Val(total));
        }
    }

    /// The free arrays of a function whose per-element gradients an
    /// operation stores anyway (`map`, the scalar fold of Figure 16): all
    /// of them are kept sparse.
    pub(crate) fn free_arrays(fv: &[(Name, Type)]) -> Vec<Name> {
        fv.iter()
            .filter(|(_, t)| matches!(t, Type::Array(..)))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The free arrays a reverse scan of vector–Jacobian products
    /// (`Deriver::reverse_step`) keeps sparse: those whose size is not a
    /// number written in the program. Records make the scan store every
    /// state (each state holds its step's), where a summed cotangent rides
    /// in the scan's accumulator; an array of a size the program fixes
    /// costs its size per step, which is the cheaper of the two for the
    /// small fixed arrays programs write (observations, coefficients),
    /// while an array of a symbolic size may be any size.
    pub(crate) fn scattered_by_scans(fv: &[(Name, Type)]) -> Vec<Name> {
        fv.iter()
            .filter(|(_, t)| matches!(t, Type::Array(_, n) if n.as_literal().is_none()))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The free variables whose cotangents a body's gradient kept
    /// ([`Gradient::kept`]).
    pub(crate) fn kept(fv: Vec<(Name, Type)>, kept: &[bool]) -> Vec<(Name, Type)> {
        fv.into_iter()
            .zip(kept)
            .filter_map(|(v, &k)| k.then_some(v))
            .collect()
    }

    /// The sparse cotangents of an operation that applies `function` once
    /// per element of `per_element` (its gradients, tuples of `len`
    /// components whose records start at `first`): each record's
    /// positions and values over the elements (the values times
    /// `weights`, an array of reals, if given) scattered into its array
    /// by one `reduce_by_index`. A record whose position is the same for
    /// every element (a free variable of `function`, or a constant) is
    /// one sparse entry of the sum of its values instead, which an
    /// enclosing operation scatters in turn.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scatter_records(
        &mut self,
        sw: &mut Sweep,
        g: &Gradient,
        function: &Expr,
        ctx: &[(Name, Type)],
        per_element: &Expr,
        first: usize,
        len: usize,
        weights: Option<&Expr>,
    ) {
        let mut free = std::collections::HashSet::new();
        gradlift_lang::interp::free_vars(
            function,
            &mut gradlift_lang::scope::Scope::new(),
            &mut free,
        );
        let type_of = |a: &Name| {
            ctx.iter()
                .find(|(n, _)| n == a)
                .expect("a free array")
                .1
                .clone()
        };
        let mut scattered: Vec<(Name, Expr)> = Vec::new();
        for (r, ((a, elem), position)) in g.records.iter().zip(&g.positions).enumerate() {
            let component = |d: &mut Deriver, k: usize| {
                let x = d.names.fresh("g");
                (x.clone(), Self::component(var(&x), k, len))
            };
            let (x, at) = component(self, first + 2 * r);
            let positions = map1(&x, at, per_element.clone());
            let (x, value) = component(self, first + 2 * r + 1);
            let values = match weights {
                Some(w) => {
                    let c = self.names.fresh("c");
                    let scaled = crate::adjoint::scale(elem, var(&c), value, &mut self.names);
                    array_op(
                        ArrayOp::Map2,
                        lambda(vec![pvar(&x), pvar(&c)], scaled),
                        vec![per_element.clone(), w.clone()],
                    )
                }
                None => map1(&x, value, per_element.clone()),
            };
            let invariant = match &position.kind {
                ExprKind::Int(_) => true,
                ExprKind::Var(n) => free.contains(n),
                _ => false,
            };
            if invariant {
                let total = crate::adjoint::sum(elem, values, &mut self.names);
                let total = self.bind(&mut sw.rev, "total", total);
                let sparse = Adj::Sparse(vec![(position.clone(), total)]);
                self.add(sw, &var(a), &type_of(a), sparse);
                continue;
            }
            let positions = self.bind(&mut sw.rev, "positions", positions);
            let values = self.bind(&mut sw.rev, "values", values);
            match scattered.iter_mut().find(|(n, _)| n == a) {
                Some((_, acc)) => {
                    let base = self.bind(&mut sw.rev, "scattered", acc.clone());
                    *acc = crate::adjoint::scatter_arrays(base, positions, values);
                }
                None => {
                    let base = crate::adjoint::zeros(&type_of(a));
                    let total = crate::adjoint::scatter_arrays(base, positions, values);
                    scattered.push((a.clone(), total));
                }
            }
        }
        for (a, total) in scattered {
            self.add(sw, &var(&a), &type_of(&a), Adj::Val(total));
        }
    }
}
