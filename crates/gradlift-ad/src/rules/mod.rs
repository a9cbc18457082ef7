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
use crate::direct::{AdResult, Arg, Deriver, Sweep};
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
                self.checkpoint_backward(sw, schedule, params, body, args, ty, z)
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
            (ArrayOp::Revfold(_), _) => Err(crate::direct::AdError::Unsupported {
                what: "a `revfold` (a Target form)".into(),
                span: out.span,
            }),
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
}
