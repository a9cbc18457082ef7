//! Free variables of lambdas and the closures partial evaluation makes of
//! them.
//!
//! A closure captures the value of every free variable of its lambda (a
//! variable bound nowhere is captured as itself), so its body can be
//! evaluated on top of whatever environment is current where it is applied.
//! Each lambda's free variables are computed once and remembered by the
//! address of its body; the first walk of partial evaluation, which finds
//! the free variables of the whole term, visits every lambda and so fills
//! the memo. One scratch scope serves all lambdas: a name's binding records
//! how many bindings precede it, so a name is bound inside a lambda exactly
//! when that number is at least the scope's size on entry to the lambda.

use super::{Fun, Pe, Val};
use crate::simplify::names::{Env, FxSet};
use crate::simplify::term::for_each_child;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use std::rc::Rc;
use std::sync::Arc;

/// Names without repetition, in order of first appearance. Most lambdas
/// have a few free variables, so a list is searched until it grows long.
#[derive(Default)]
pub(super) struct FreeNames {
    pub list: Vec<Name>,
    set: FxSet<Name>,
}

impl FreeNames {
    pub fn add(&mut self, n: &Name) {
        const SHORT: usize = 16;
        let known = if self.list.len() <= SHORT {
            self.list.contains(n)
        } else {
            if self.set.is_empty() {
                self.set.extend(self.list.iter().cloned());
            }
            !self.set.insert(n.clone())
        };
        if !known {
            self.list.push(n.clone());
        }
    }
}

/// Binds the names of `pat`, each recording how many bindings precede it.
pub(super) fn push_names(pat: &Pattern, scope: &mut Env<usize>) {
    match pat {
        Pattern::Var(n, _) => scope.push(n.clone(), scope.mark()),
        Pattern::Wild(_) => {}
        Pattern::Tuple(ps, _) => ps.iter().for_each(|p| push_names(p, scope)),
    }
}

impl Pe<'_> {
    pub(super) fn closure(&mut self, params: &[Param], body: &Arc<Expr>) -> Val {
        let free = self.lambda_free_vars(params, body);
        // Every free variable is captured, those bound nowhere as
        // themselves, so the body can be evaluated on top of any
        // environment.
        let captured = free
            .iter()
            .map(|n| {
                let v = self.env.get(n).cloned();
                (n.clone(), v.unwrap_or_else(|| Val::Var(n.clone())))
            })
            .collect();
        Val::Fun(Rc::new(Fun::Closure {
            params: params.to_vec(),
            body: body.clone(),
            captured,
        }))
    }

    /// The free variables of a lambda, computed once per lambda.
    pub(super) fn lambda_free_vars(&mut self, params: &[Param], body: &Arc<Expr>) -> Rc<[Name]> {
        self.lambda_free_vars_in(params, body, &mut Env::default())
    }

    /// [`Pe::lambda_free_vars`] with `scope` as scratch: a name's binding
    /// records how many bindings were in scope before it, so a name is
    /// bound inside the lambda exactly when that number is at least the
    /// scope's size on entry.
    pub(super) fn lambda_free_vars_in(
        &mut self,
        params: &[Param],
        body: &Arc<Expr>,
        scope: &mut Env<usize>,
    ) -> Rc<[Name]> {
        let key = Arc::as_ptr(body) as usize;
        if let Some((_, free)) = self.free_vars.get(&key) {
            return free.clone();
        }
        let base = scope.mark();
        params.iter().for_each(|p| push_names(&p.pat, scope));
        let mut out = FreeNames::default();
        self.collect_free(body, scope, base, &mut out);
        scope.pop_to(base);
        let free: Rc<[Name]> = out.list.into();
        self.free_vars.insert(key, (body.clone(), free.clone()));
        free
    }

    /// Adds to `out` the variables of `e` not bound at or above `base`.
    pub(super) fn collect_free(
        &mut self,
        e: &Expr,
        scope: &mut Env<usize>,
        base: usize,
        out: &mut FreeNames,
    ) {
        guard(|| {
            let mark = scope.mark();
            let mut e = e;
            while let ExprKind::Let {
                pat, value, body, ..
            } = &e.kind
            {
                self.collect_free(value, scope, base, out);
                push_names(pat, scope);
                e = body;
            }
            self.walked += 1;
            let free_here = |n: &Name, scope: &Env<usize>| scope.get(n).is_none_or(|&at| at < base);
            match &e.kind {
                ExprKind::Var(n) => {
                    if free_here(n, scope) {
                        out.add(n);
                    }
                }
                ExprKind::Lambda(ps, body) => {
                    for n in self.lambda_free_vars_in(ps, body, scope).iter() {
                        if free_here(n, scope) {
                            out.add(n);
                        }
                    }
                }
                _ => for_each_child(e, &mut |c| self.collect_free(c, scope, base, out)),
            }
            scope.pop_to(mark);
        })
    }
}
