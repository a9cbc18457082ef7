//! The text forms of Source UNF and Target UNF read back: printing the
//! parsed text gives the same text, on the examples and on generated
//! programs.

use gradlift_ad::inline::inline;
use gradlift_ad::pipeline::{source_unf, target_unf};
use gradlift_ad::reverse_unf::parse_target_unf;
use gradlift_ad::unf::parse_unf;
use gradlift_lang::testing::{generate, Config};
use gradlift_lang::{check_module, check_source};

fn round_trip(closed: &gradlift_ad::inline::Closed) {
    let u = source_unf(closed).unwrap();
    let text = u.to_string();
    let back = parse_unf(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_string(), text);
    let t = target_unf(closed).unwrap();
    let text = t.to_string();
    let back = parse_target_unf(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_string(), text);
}

#[test]
fn examples_round_trip() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "grad") {
            let m = check_source("e.grad", &std::fs::read_to_string(&path).unwrap()).unwrap();
            for i in 0..m.module.defs.len() {
                round_trip(&gradlift_ad::pipeline::expanded(&m, i).unwrap());
            }
        }
    }
}

#[test]
fn generated_programs_round_trip() {
    for seed in 0..300 {
        let case = generate(seed, &Config::default());
        let m = check_module(case.module).unwrap();
        round_trip(&inline(&m, m.module.defs.len() - 1));
    }
}

#[test]
fn malformed_text_is_an_error_with_a_line() {
    let e = parse_unf("# context: (x: R)\nvar_{1;1};\nop_{2;1}[sin];\nbogus").unwrap_err();
    assert_eq!(e.line, 3);
    let e = parse_unf("# context: (x: R)\nvar_{1;2}").unwrap_err();
    assert!(e.message.contains("no entry"), "{e}");
}

/// A module built without text (all spans dummy) instantiates each call
/// of a definition by its own sizes: the type checker gives the calls
/// distinct spans before recording their instantiations by span.
#[test]
fn calls_of_a_module_without_text_keep_their_own_sizes() {
    use gradlift_lang::{Expr, Span};
    fn dummy(e: &Expr) -> Expr {
        let mut out = e.map_children(&mut dummy);
        out.span = Span::DUMMY;
        out
    }
    let text = "def h(p: [R; k]) -> R = len(map2 (a, b. a + b) (if p[0] < 0 then replicate(k, 1) else p) p)\n\
                def main(x: R) -> R = h([x, 2]) + h([x, x, 3])";
    let mut module = gradlift_lang::parse_module(text).unwrap();
    for def in &mut module.defs {
        def.body = dummy(&def.body);
    }
    let checked = gradlift_lang::check_module(module).unwrap();
    let closed = gradlift_ad::inline::inline(&checked, 1);
    let ty = gradlift_lang::types::check_expr(&closed.context(), &closed.size_vars, &closed.body)
        .unwrap();
    assert_eq!(ty, gradlift_lang::Type::Real);
    let v = gradlift_lang::interp::eval_expr(
        &checked,
        &[(
            gradlift_lang::Name::from("x"),
            gradlift_lang::Value::Real(1.0),
        )],
        &closed.body,
    )
    .unwrap();
    assert_eq!(v.as_real(), Some(5.0));
}
