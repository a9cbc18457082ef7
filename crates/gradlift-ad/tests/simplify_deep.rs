//! Scale: 100,000-binding chains simplify on a thread with an 8 MiB stack
//! (the default of a main thread). Nothing here asserts a time; the
//! benchmarks measure speed. Each test must simply complete, with the right
//! value.

mod simplify_support;

use gradlift_ad::simplify::{is_first_order, simplify_with_stats, Options, Rule};
use gradlift_lang::syntax::*;
use gradlift_lang::{Prim, Span, Value};
use simplify_support::*;
use std::sync::Arc;

const N: usize = 100_000;
const XS: [f64; 4] = [0.5, -1.25, 2.0, 0.75];
const MS: [f64; 4] = [0.99999, 1.00001, 0.999995, 1.000005];

fn synth(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::DUMMY)
}
fn var(n: &str) -> Expr {
    synth(ExprKind::Var(Name::from(n)))
}
fn real(x: f64) -> Expr {
    synth(ExprKind::Const(x))
}
fn prim(p: Prim, a: Expr, b: Expr) -> Expr {
    synth(ExprKind::Prim(p, vec![a, b]))
}
fn let_in(name: &str, value: Expr, body: Expr) -> Expr {
    synth(ExprKind::Let {
        pat: Pattern::Var(Name::from(name), Span::DUMMY),
        ty: None,
        value: Box::new(value),
        body: Box::new(body),
    })
}

fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the test thread");
}

/// Types and values of the free variables.
type Context = (Vec<(Name, Type)>, Vec<(Name, Value)>);

fn free_vars() -> Context {
    let names = ["x0", "x1", "x2", "x3"];
    let types = names.iter().map(|n| (Name::from(*n), Type::Real)).collect();
    let vals = names
        .iter()
        .zip(XS)
        .map(|(n, x)| (Name::from(*n), Value::Real(x)))
        .collect();
    (types, vals)
}

/// `let Y0 = fun (a: R, z: R) -> (a, z) in … let Yk = fun (a: R, z: R) ->
/// Y(k-1)(a + xⱼ * z, z * mⱼ) in … Y_N(0ₛ, 1)`, j = k mod 4.
fn continuation_chain() -> Expr {
    let params = || {
        ["a", "z"]
            .iter()
            .map(|n| Param {
                pat: Pattern::Var(Name::from(*n), Span::DUMMY),
                ty: Some(Type::Real),
            })
            .collect::<Vec<_>>()
    };
    let mut body = synth(ExprKind::Apply(
        Box::new(var(&format!("Y{N}"))),
        vec![Expr::structural_zero(), real(1.0)],
    ));
    for k in (0..=N).rev() {
        let lambda_body = if k == 0 {
            synth(ExprKind::Tuple(vec![var("a"), var("z")]))
        } else {
            let x = var(&format!("x{}", k % 4));
            let a = prim(Prim::Add, var("a"), prim(Prim::Mul, x, var("z")));
            let z = prim(Prim::Mul, var("z"), real(MS[k % 4]));
            synth(ExprKind::Apply(
                Box::new(var(&format!("Y{}", k - 1))),
                vec![a, z],
            ))
        };
        let lambda = synth(ExprKind::Lambda(params(), Arc::new(lambda_body)));
        body = let_in(&format!("Y{k}"), lambda, body);
    }
    body
}

#[test]
fn a_chain_of_100000_continuations_simplifies() {
    on_big_stack(|| {
        let input = continuation_chain();
        let (out, stats) = simplify_with_stats(&input, &Options::default()).expect("simplifies");
        assert!(is_first_order(&out).is_ok());
        assert_eq!(count_lambdas(&out), 0);
        assert_eq!(stats.count(Rule::InlineFun), N + 1);
        // The value, computed the way the chain computes it.
        let (mut a, mut z) = (0.0f64, 1.0f64);
        for k in (1..=N).rev() {
            a += XS[k % 4] * z;
            z *= MS[k % 4];
        }
        let (types, vals) = free_vars();
        assert_eq!(type_of(&out, &types, &[]), type_of(&input, &types, &[]));
        let v = eval(&out, &vals).expect("evaluates");
        let expected = Value::tuple(vec![Value::Real(a), Value::Real(z)]);
        assert!(v.same(&expected), "{v} ≠ {expected}");
    });
}

/// `let v1 = x0 * x1 + 1 in let v2 = v1 * x1 + sin(x2) in …`, each
/// binding also recomputing `sin(x2)`, which CSE binds once.
#[test]
fn a_chain_of_100000_lets_simplifies() {
    on_big_stack(|| {
        let mut body = var(&format!("v{N}"));
        for k in (1..=N).rev() {
            let prev = if k == 1 {
                var("x0")
            } else {
                var(&format!("v{}", k - 1))
            };
            let sin = synth(ExprKind::Prim(Prim::Sin, vec![var("x2")]));
            let value = prim(Prim::Add, prim(Prim::Mul, prev, var("x1")), sin);
            body = let_in(&format!("v{k}"), value, body);
        }
        let (out, stats) = simplify_with_stats(&body, &Options::default()).expect("simplifies");
        assert!(stats.count(Rule::Cse) >= N - 1, "{stats}");
        let (types, vals) = free_vars();
        let mut v = XS[0];
        for _ in 0..N {
            v = v * XS[1] + XS[2].sin();
        }
        let got = eval(&out, &vals).expect("evaluates");
        assert!(got.same(&Value::Real(v)), "{got} ≠ {v}");
        assert_eq!(type_of(&out, &types, &[]), Type::Real);
    });
}

/// A term nested 100,000 deep without `let` chains: `let` in the value of
/// a `let` (floated out), and a deep sum.
#[test]
fn deeply_nested_values_simplify() {
    on_big_stack(|| {
        let mut value = var("x0");
        for k in 0..N {
            let name = format!("w{k}");
            value = let_in(&name, value, prim(Prim::Add, var(&name), var("x1")));
        }
        let input = let_in("r", value, prim(Prim::Mul, var("r"), var("r")));
        let (out, stats) = simplify_with_stats(&input, &Options::default()).expect("simplifies");
        assert!(stats.count(Rule::LetFloat) > 0);
        let (_, vals) = free_vars();
        let mut w = XS[0];
        for _ in 0..N {
            w += XS[1];
        }
        let got = eval(&out, &vals).expect("evaluates");
        assert!(got.same(&Value::Real(w * w)), "{got} ≠ {}", w * w);
    });
}
