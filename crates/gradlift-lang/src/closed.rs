//! A definition as one closed term: the form every backend takes.
//!
//! Inlining (`gradlift_ad::inline`) makes one of a definition of a checked
//! module; differentiation, forward mode and simplification make others (a
//! gradient program, a forward-mode program); the interpreter and the JIT
//! run them. Its only free variables are its parameters and size variables.

use crate::names::NameSupply;
use crate::syntax::{Def, DefParam, Expr, ExprKind, Name, Type};

/// One definition as a closed term.
#[derive(Clone, Debug)]
pub struct Closed {
    /// The definition's name.
    pub name: Name,
    /// Its parameters: name and type, `None` for a size parameter.
    pub params: Vec<(Name, Option<Type>)>,
    /// Its size variables (size parameters included).
    pub size_vars: Vec<Name>,
    /// Its result type.
    pub ret: Type,
    /// The body.
    pub body: Expr,
}

impl Closed {
    /// The value parameters with their types (size variables are not in
    /// it: they are not differentiated).
    pub fn context(&self) -> Vec<(Name, Type)> {
        let mut ctx: Vec<(Name, Type)> = Vec::new();
        for (n, t) in &self.params {
            if let Some(t) = t {
                ctx.push((n.clone(), t.clone()));
            }
        }
        ctx
    }

    /// A name supply that gives no name this term uses: its parameters,
    /// its size variables, and every name its body reads or binds.
    pub fn name_supply(&self) -> NameSupply {
        let mut names = NameSupply::new();
        for (n, _) in &self.params {
            names.reserve(n);
        }
        for n in &self.size_vars {
            names.reserve(n);
        }
        let mut todo = vec![&self.body];
        let mut bound = Vec::new();
        while let Some(e) = todo.pop() {
            match &e.kind {
                ExprKind::Var(n) => names.reserve(n),
                ExprKind::Let { pat, .. } => pat.names(&mut bound),
                ExprKind::Lambda(ps, _) => ps.iter().for_each(|p| p.pat.names(&mut bound)),
                _ => {}
            }
            bound.drain(..).for_each(|n| names.reserve(&n));
            todo.extend(e.children());
        }
        names
    }

    /// `def name(params) -> ret = body`, which prints as text the parser
    /// reads back.
    pub fn definition(&self) -> Def {
        Def {
            name: self.name.clone(),
            name_span: Default::default(),
            params: self
                .params
                .iter()
                .map(|(n, t)| DefParam {
                    name: n.clone(),
                    span: Default::default(),
                    ty: t.clone(),
                })
                .collect(),
            ret: Some(self.ret.clone()),
            body: self.body.clone(),
        }
    }
}
