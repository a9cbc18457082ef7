//! Arbitrary bytes to the parser and the type checker: an error or a
//! checked program, never a panic, never a hang. A module that parses
//! prints to text that parses back to the same module, and type-checks
//! exactly when the original does.

#![no_main]

use gradlift_lang::{check_module, parse_module};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(module) = parse_module(&text) else {
        return;
    };
    let printed = module.to_string();
    let reparsed = match parse_module(&printed) {
        Ok(m) => m,
        Err(e) => panic!("the printed module does not parse: {e}\n{printed}\nfrom\n{text}"),
    };
    assert!(
        reparsed.same(&module),
        "printing changes the module:\n{printed}\nfrom\n{text}"
    );
    let original = check_module(module).is_ok();
    let again = check_module(reparsed).is_ok();
    assert_eq!(
        original, again,
        "the printed module checks differently:\n{printed}\nfrom\n{text}"
    );
});
