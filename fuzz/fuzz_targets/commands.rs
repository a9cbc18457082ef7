//! Well-typed programs from the generator through what every subcommand
//! does besides `eval` and `grad`: the `emit` stages read back, checkpointed
//! gradients, `jvp`, `hvp`, `cost`, and `fit` with a one-step budget. The
//! checks are those of tests/support/commands_oracle.rs, which the test
//! suite runs on fixed seeds (tests/reliability_commands.rs).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/mod.rs"]
mod support;

thread_local! {
    static JIT: gradlift::Jit = gradlift::Jit::new().expect("a JIT for this host").verify(true);
}

fuzz_target!(|data: &[u8]| {
    let input = support::pipeline_oracle::Input::from_bytes(data);
    JIT.with(|jit| support::commands_oracle::check(&input, jit));
});
