//! Minibatches: the rows of a loss's data.
//!
//! A loss over a data set usually takes it as arrays whose outer length is
//! one size variable (`X: [[R; d]; m], y: [R; m]`) and averages over the
//! `m` rows. [`Loss::row_axis`] finds that variable; [`Loss::select_rows`]
//! replaces the data by some of its rows and sets `m` to their number, so
//! the same native code evaluates the loss of a minibatch.

use crate::loss::{Input, Loss};
use gradlift::{Name, Type};
use std::collections::BTreeSet;

/// The size variable that counts data rows, and how many there are.
#[derive(Clone, Debug, PartialEq)]
pub struct RowAxis {
    /// The size variable (`m`).
    pub size: Name,
    /// Its value for the whole data set.
    pub rows: usize,
    /// The data parameters with `m` rows.
    pub params: Vec<Name>,
}

impl Loss {
    /// The size variable that counts the rows of the data, if there is
    /// exactly one: a size variable `m` that is the outer length of some
    /// data parameter (`[…; m]`), appears nowhere else in the data
    /// parameters' types, is not in a fitted parameter's type and is not a
    /// size parameter.
    pub fn row_axis(&self) -> Option<RowAxis> {
        let sig = self.gradient.native().signature();
        let mut excluded = BTreeSet::new();
        let mut candidates: Vec<(Name, Vec<Name>)> = Vec::new();
        let mut inner_vars = BTreeSet::new();
        for (p, ty) in &sig.params {
            let Some(ty) = ty else {
                excluded.insert(p.clone());
                continue;
            };
            if self.names.contains(p) {
                size_vars_of(ty, &mut excluded);
                continue;
            }
            match ty {
                Type::Array(elem, n) if n.constant == 0 && n.terms.len() == 1 => {
                    let (v, k) = n.terms.iter().next().expect("one term");
                    if *k == 1 {
                        match candidates.iter_mut().find(|(c, _)| c == v) {
                            Some((_, ps)) => ps.push(p.clone()),
                            None => candidates.push((v.clone(), vec![p.clone()])),
                        }
                    } else {
                        inner_vars.insert(v.clone());
                    }
                    size_vars_of(elem, &mut inner_vars);
                }
                other => size_vars_of(other, &mut inner_vars),
            }
        }
        candidates.retain(|(v, _)| !excluded.contains(v) && !inner_vars.contains(v));
        match candidates.as_slice() {
            [(v, params)] => {
                let k = self.size_vars.iter().position(|s| s == v)?;
                Some(RowAxis {
                    size: v.clone(),
                    rows: self.full_sizes[k] as usize,
                    params: params.clone(),
                })
            }
            _ => None,
        }
    }

    /// Evaluates from now on over the rows `rows` (indices into the full
    /// data) of the parameters of `axis`, or over all rows with `None`.
    pub fn select_rows(&mut self, axis: &RowAxis, rows: Option<&[usize]>) {
        let k = self
            .size_vars
            .iter()
            .position(|s| *s == axis.size)
            .expect("the row axis is a size variable");
        let data_names = self.names_of_data();
        let data = self.inputs.iter_mut().filter_map(|i| match i {
            Input::Data { value, flat } => Some((value, flat)),
            Input::Fitted { .. } => None,
        });
        for (name, (value, flat)) in data_names.iter().zip(data) {
            if !axis.params.contains(name) {
                continue;
            }
            flat.clear();
            let all = value.as_array().expect("a parameter with rows is an array");
            match rows {
                Some(rows) => rows.iter().for_each(|&r| all[r].flatten(flat)),
                None => value.flatten(flat),
            }
        }
        self.sizes[k] = rows.map_or(self.full_sizes[k], |r| r.len() as i64);
        *self.last.lock().expect("cache") = None;
    }

    fn names_of_data(&self) -> Vec<Name> {
        // Data parameters in order: the value parameters that are not fitted.
        let sig = self.gradient.native().signature();
        sig.params
            .iter()
            .filter(|(p, t)| t.is_some() && !self.names.contains(p))
            .map(|(p, _)| p.clone())
            .collect()
    }
}

fn size_vars_of(ty: &Type, out: &mut BTreeSet<Name>) {
    match ty {
        Type::Array(elem, n) => {
            out.extend(n.terms.keys().cloned());
            size_vars_of(elem, out);
        }
        Type::Tuple(ts) => ts.iter().for_each(|t| size_vars_of(t, out)),
        Type::Fun(ps, r) => {
            ps.iter().for_each(|t| size_vars_of(t, out));
            size_vars_of(r, out);
        }
        Type::Real | Type::Int | Type::Bool => {}
    }
}
