//! `map` and `map2` (Figure 5; `map` by Appendix A.3; general element types
//! by Figure 17).
//!
//! Forward: `R = map2 (x, y. e) A B`, `Rᵢ = e(Aᵢ, Bᵢ)`, `e` with free
//! variables Γ'. Reverse, for the cotangent `Z` of `R`, when `e : R`
//! (Figure 5 with E3's correction):
//!
//! ```text
//! P  = map2 (x, y. ∇_{Γ',x,y} e) A B          -- per element (∂Γ', ∂x, ∂y)
//! Ā += map2 (p, ζ. ζ ·̂ p.x) P Z
//! B̄ += map2 (p, ζ. ζ ·̂ p.y) P Z
//! Γ̄' += reduce (+̂) 0 (map2 (p, ζ. ζ ·̂ p.Γ') P Z)
//! ```
//!
//! One gradient of the body serves all three (the figure writes three
//! separate calls; this is the same value at a third of the cost). When the
//! body returns a tuple or an array (Figure 17), the element cotangent ζ is
//! not a scalar factor: the body's gradient is seeded with ζ itself,
//! `P = map2 (x, (y, ζ). ∇e·ζ) A (zip B Z)`, which is the vector–Jacobian
//! product Figure 17 writes as `g ∗̂ ζ`, without forming the Jacobian.
//!
//! Not in the paper: a free array of `e` read at computed positions is left
//! out of `P`'s `Γ'` part; each element returns its positions and values
//! instead, scattered once after the map (`Deriver::scatter_records`), so
//! that `m` lookups into `n` elements cost O(m + n), not the O(m · n) of
//! summing one cotangent array per element.

use crate::adjoint::{scale, Adj};
use crate::direct::{AdResult, Arg, Deriver, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

impl Deriver {
    pub(crate) fn map_backward(
        &mut self,
        sw: &mut Sweep,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        ty: &Type,
        z: Expr,
    ) -> AdResult<()> {
        let Type::Array(elem_ty, _) = ty else {
            unreachable!("map returns an array")
        };
        let elem_types: Vec<Type> = args
            .iter()
            .map(|(_, t)| match t {
                Type::Array(e, _) => (**e).clone(),
                _ => unreachable!("map takes arrays"),
            })
            .collect();
        let all_fv = self.free_slots(body, params);
        let mut ctx = all_fv.clone();
        ctx.extend(params.iter().cloned().zip(elem_types.iter().cloned()));
        let scalar = **elem_ty == Type::Real;
        // Free arrays the body reads at computed positions only: their
        // cotangents are scattered once after the map.
        let sparse = Self::free_arrays(&all_fv);
        let mut layout = None;
        let mut differentiate = |this: &mut Self, seed: Adj| -> AdResult<Expr> {
            let (term, g) = this.gradient_with(&ctx, body, seed, &sparse)?;
            layout = Some(g);
            Ok(term)
        };

        // P: the per-element gradients, seeded with 1 (scalar body) or ζ.
        let per_element = if scalar {
            let g = differentiate(self, Adj::Val(real(1.0)))?;
            let lam = lambda(params.iter().map(pvar).collect(), g);
            array_op(
                if params.len() == 1 {
                    ArrayOp::Map
                } else {
                    ArrayOp::Map2
                },
                lam,
                args.iter().map(|a| a.0.clone()).collect(),
            )
        } else {
            let zeta = self.names.fresh("zeta");
            let g = differentiate(self, Adj::Val(var(&zeta)))?;
            // Pair the last array with Z so that the body sees ζ.
            let last = params.len() - 1;
            let (q, zz) = (self.names.fresh("q"), self.names.fresh("zz"));
            let zipped = array_op(
                ArrayOp::Map2,
                lambda(vec![pvar(&q), pvar(&zz)], tuple(vec![var(&q), var(&zz)])),
                vec![args[last].0.clone(), z.clone()],
            );
            let mut pats: Vec<Pattern> = params.iter().map(pvar).collect();
            pats[last] = ptuple(vec![pvar(&params[last]), pvar(&zeta)]);
            let mut arrays: Vec<Expr> = args.iter().map(|a| a.0.clone()).collect();
            arrays[last] = zipped;
            array_op(
                if params.len() == 1 {
                    ArrayOp::Map
                } else {
                    ArrayOp::Map2
                },
                lambda(pats, g),
                arrays,
            )
        };
        let p = self.bind(&mut sw.rev, "partials", per_element);
        let g = layout.expect("the body was differentiated");
        let fv = Self::kept(all_fv, &g.kept);
        let len = fv.len() + params.len() + 2 * g.records.len();
        let weights = scalar.then_some(&z);
        let function = lambda(params.iter().map(pvar).collect(), body.clone());
        self.scatter_records(
            sw,
            &g,
            &function,
            &ctx,
            &p,
            fv.len() + params.len(),
            len,
            weights,
        );

        // Cotangents of the arrays.
        for (i, ((a, at), et)) in args.iter().zip(&elem_types).enumerate() {
            let g = self.names.fresh("g");
            let part = Self::component(var(&g), fv.len() + i, len);
            let contribution = if scalar {
                let zeta = self.names.fresh("zeta");
                let scaled = scale(et, var(&zeta), part, &mut self.names);
                array_op(
                    ArrayOp::Map2,
                    lambda(vec![pvar(&g), pvar(&zeta)], scaled),
                    vec![p.clone(), z.clone()],
                )
            } else {
                array_op(ArrayOp::Map, lambda(vec![pvar(&g)], part), vec![p.clone()])
            };
            self.add(sw, a, at, Adj::Val(contribution));
        }

        // Cotangents of the free variables: sums over the elements.
        let scaled_p = if scalar && !fv.is_empty() {
            let (g, zeta) = (self.names.fresh("g"), self.names.fresh("zeta"));
            let parts = fv
                .iter()
                .enumerate()
                .map(|(j, (_, t))| {
                    let part = Self::component(var(&g), j, len);
                    scale(t, var(&zeta), part, &mut self.names)
                })
                .collect();
            let scaled = array_op(
                ArrayOp::Map2,
                lambda(vec![pvar(&g), pvar(&zeta)], tuple(parts)),
                vec![p.clone(), z],
            );
            let s = self.bind(&mut sw.rev, "scaled", scaled);
            self.add_free_sums(sw, &fv, &s, 0, fv.len());
            return Ok(());
        } else {
            p
        };
        self.add_free_sums(sw, &fv, &scaled_p, 0, len);
        Ok(())
    }
}
