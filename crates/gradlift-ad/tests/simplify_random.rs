//! Differential tests of the simplifier on generated programs: every
//! definition's body is simplified, and the simplified module must
//! type-check with the same signatures and give bit-identical values (NaN
//! equal to NaN) to the original at the case's arguments.
//!
//! A second variant first makes the programs higher order: primitive
//! applications become applied lambdas, `let`-bound functions and
//! continuations (`let k = fun (r: R) -> r in k(…)`), and primitives passed
//! to array operations become `let`-bound lambdas, with parameter names that
//! shadow the program's own variables. Partial evaluation must remove all
//! of it.

mod simplify_support;

use gradlift_ad::simplify::{is_first_order, simplify_with_stats, Options, Rule, Stats};
use gradlift_lang::deep::guard;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use gradlift_lang::testing::{generate, Case, Config};
use gradlift_lang::types::check_expr;
use gradlift_lang::{check_module, interp, Span};
use std::sync::Arc;

const SEEDS: u64 = 1000;

fn has_call(e: &Expr) -> bool {
    guard(|| matches!(e.kind, ExprKind::Apply(..)) || e.children().any(has_call))
}

/// Simplifies every definition of `module` (after `prepare`), checks the
/// invariants, and compares `main` with the original at the case's
/// arguments.
fn check_case(
    seed: u64,
    case: &Case,
    prepare: &dyn Fn(&Expr) -> Expr,
    opts: &Options,
    stats: &mut Stats,
) {
    let original = check_module(case.module.clone()).expect("generated programs type-check");
    let main = original.module.defs.len() - 1;
    let Ok(expected) = interp::call(&original, main, &case.args) else {
        return;
    };
    let prepared = {
        let mut m = case.module.clone();
        for d in &mut m.defs {
            d.body = prepare(&d.body);
        }
        let text = m.to_string();
        check_module(m).unwrap_or_else(|e| panic!("seed {seed}: prepared program: {e}\n{text}"))
    };
    let mut simplified = prepared.module.clone();
    for (i, d) in simplified.defs.iter_mut().enumerate() {
        let (body, s) = simplify_with_stats(&d.body, opts)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", d.body));
        stats.merge(&s);
        if !has_call(&d.body) {
            if let Err((_, message)) = is_first_order(&body) {
                panic!("seed {seed}: {message}\n{body}");
            }
            let sig = &prepared.sigs[i];
            let vars: Vec<(Name, Type)> = sig
                .params
                .iter()
                .filter_map(|(n, t)| t.clone().map(|t| (n.clone(), t)))
                .collect();
            let before = check_expr(&vars, &sig.size_vars, &d.body).expect("prepared body");
            let after = check_expr(&vars, &sig.size_vars, &body)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{body}"));
            assert_eq!(before, after, "seed {seed}");
        }
        d.body = body;
    }
    let text = simplified.to_string();
    let checked = check_module(simplified)
        .unwrap_or_else(|e| panic!("seed {seed}: simplified program: {e}\n{text}"));
    assert_eq!(checked.sigs, original.sigs, "seed {seed}");
    let got = interp::call(&checked, main, &case.args)
        .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
    assert!(
        expected.same(&got),
        "seed {seed}: {expected} ≠ {got}\noriginal:\n{}\nsimplified:\n{text}",
        case.text()
    );
}

#[test]
fn generated_programs_keep_their_values() {
    let mut stats = Stats::default();
    for seed in 0..SEEDS {
        let case = generate(seed, &Config::default());
        check_case(seed, &case, &|e| e.clone(), &Options::default(), &mut stats);
    }
    println!("{stats}");
    for rule in [
        Rule::ConstFold,
        Rule::Cse,
        Rule::InlineOnce,
        Rule::MapFusion,
    ] {
        assert!(stats.count(rule) > 0, "{rule} never fired: {stats}");
    }
}

#[test]
fn generated_programs_keep_their_values_without_cse() {
    let opts = Options {
        cse: false,
        ..Options::default()
    };
    let mut stats = Stats::default();
    for seed in 0..SEEDS {
        let case = generate(seed, &Config::default());
        check_case(seed, &case, &|e| e.clone(), &opts, &mut stats);
    }
}

// ---- Making programs higher order

fn synth(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::DUMMY)
}

fn var(n: &str) -> Expr {
    synth(ExprKind::Var(Name::from(n)))
}

fn real_params(names: &[&str]) -> Vec<Param> {
    names
        .iter()
        .map(|n| Param {
            pat: Pattern::Var(Name::from(*n), Span::DUMMY),
            ty: Some(Type::Real),
        })
        .collect()
}

/// `fun (x0: R, ...) -> p(x0, ...)`, its parameters named like the
/// generator's variables so they shadow them.
fn prim_lambda(p: gradlift_lang::Prim) -> Expr {
    let names: &[&str] = if p.info().arity == 1 {
        &["x0"]
    } else {
        &["x0", "v_1"]
    };
    let body = synth(ExprKind::Prim(p, names.iter().map(|n| var(n)).collect()));
    synth(ExprKind::Lambda(real_params(names), Arc::new(body)))
}

fn let_in(name: &str, value: Expr, body: Expr) -> Expr {
    synth(ExprKind::Let {
        pat: Pattern::Var(Name::from(name), Span::DUMMY),
        ty: None,
        value: Box::new(value),
        body: Box::new(body),
    })
}

fn apply(f: Expr, args: Vec<Expr>) -> Expr {
    synth(ExprKind::Apply(Box::new(f), args))
}

/// The higher-order version of `e`; `counter` picks the wrapping of each
/// node in turn.
fn higher_order(e: &Expr, counter: &mut u64) -> Expr {
    guard(|| {
        // Size expressions must stay sizes.
        if let ExprKind::Builtin(b, args) = &e.kind {
            if matches!(
                b,
                Builtin::Iota | Builtin::Replicate | Builtin::Take | Builtin::Drop
            ) {
                let mut args = args.clone();
                for a in &mut args[1..] {
                    *a = higher_order(a, counter);
                }
                return synth(ExprKind::Builtin(*b, args));
            }
        }
        let e = e.map_children(&mut |c| higher_order(c, counter));
        *counter += 1;
        match &e.kind {
            ExprKind::Prim(p, args) if p.info().kind() == PrimKind::Real => {
                let args = args.clone();
                match *counter % 4 {
                    // (fun (x0: R, …) -> x0 op …)(args)
                    0 => apply(prim_lambda(*p), args),
                    // let f = fun … in f(args)
                    1 => let_in("f", prim_lambda(*p), apply(var("f"), args)),
                    // let kont = fun (r: R) -> r in kont(e): a continuation (not `k`,
                    // which is a size variable of the helpers)
                    2 => {
                        let k = synth(ExprKind::Lambda(real_params(&["r"]), Arc::new(var("r"))));
                        let_in("kont", k, apply(var("kont"), vec![e]))
                    }
                    _ => e,
                }
            }
            ExprKind::ArrayOp(op, f, args) if counter.is_multiple_of(2) => match f.kind {
                ExprKind::PrimFn(p) => {
                    let g = ExprKind::ArrayOp(*op, Box::new(var("g")), args.clone());
                    let_in("g", prim_lambda(p), synth(g))
                }
                _ => e,
            },
            _ => e,
        }
    })
}

#[test]
fn higher_order_programs_become_first_order() {
    let mut stats = Stats::default();
    for seed in 0..SEEDS {
        let case = generate(seed, &Config::default());
        let prepare = |e: &Expr| higher_order(e, &mut (seed * 7));
        check_case(seed, &case, &prepare, &Options::default(), &mut stats);
    }
    println!("{stats}");
    for rule in [Rule::Beta, Rule::InlineFun, Rule::Eta] {
        assert!(stats.count(rule) > 0, "{rule} never fired: {stats}");
    }
}
