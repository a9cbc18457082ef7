//! Well-typed programs from the generator through the whole pipeline:
//! interpreter, JIT, UNF and direct routes, finite differences. The
//! checks are those of tests/support/pipeline_oracle.rs, which the test
//! suite runs on fixed seeds.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/pipeline_oracle.rs"]
mod pipeline_oracle;

use pipeline_oracle::{check, Input};

thread_local! {
    static JIT: gradlift::Jit = gradlift::Jit::new().expect("a JIT for this host").verify(true);
}

fuzz_target!(|data: &[u8]| {
    let input = Input::from_bytes(data);
    JIT.with(|jit| check(&input, jit));
});
