//! A definition as one closed term: the form every backend takes.
//!
//! Inlining (`gradlift_ad::inline`) makes one of a definition of a checked
//! module; differentiation, forward mode and simplification make others (a
//! gradient program, a forward-mode program); the interpreter and the JIT
//! run them. Its only free variables are its parameters and size variables.

use crate::syntax::{Def, DefParam, Expr, Name, Type};

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
