//! Properties of the random program generator: generated programs
//! type-check, evaluate without error, and survive printer ∘ parser.

use gradlift_lang::testing::{arb_case, generate, Config};
use gradlift_lang::{check_module, interp, parse_module};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn generated_programs_type_check_and_evaluate(case in arb_case()) {
        let text = case.text();
        let checked = check_module(case.module.clone())
            .unwrap_or_else(|e| panic!("generated program does not type-check: {e}\n{text}"));
        let main = checked.module.defs.len() - 1;
        if let Err(e) = interp::call(&checked, main, &case.args) {
            panic!("generated program fails to evaluate: {e}\n{text}\nsizes: {:?}", case.sizes);
        }
    }

    #[test]
    fn printer_then_parser_is_the_identity(case in arb_case()) {
        let text = case.text();
        let parsed = parse_module(&text).unwrap_or_else(|e| panic!("printed program does not parse: {e}\n{text}"));
        // The same program once checked: a literal whole number is read
        // back as a literal, which checking makes the integer or the real
        // it was.
        let checked = |m| check_module(m).map(|c| c.module);
        let (back, want) = (checked(parsed.clone()), checked(case.module.clone()));
        prop_assert!(
            matches!((&back, &want), (Ok(a), Ok(b)) if a.same(b)),
            "round trip changed the program:\n{}\n---\n{}", text, parsed
        );
        // And printing is stable.
        prop_assert_eq!(parsed.to_string(), text);
    }
}

#[test]
fn deep_generated_programs_also_work() {
    let config = Config {
        depth: 7,
        max_size: 4,
        higher_order: false,
    };
    for seed in 0..200 {
        let case = generate(seed, &config);
        let checked = check_module(case.module.clone()).expect("type-checks");
        interp::call(&checked, checked.module.defs.len() - 1, &case.args).expect("evaluates");
    }
}
