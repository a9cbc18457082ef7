//! The `commands` fuzz target's oracle on fixed seeds: generated programs,
//! with and without function values and special values, through what
//! `emit`, `grad --checkpoint`, `jvp`, `hvp`, `cost` and `fit` do.

mod support;

use gradlift::Jit;
use support::commands_oracle::check;
use support::pipeline_oracle::Input;

#[test]
fn generated_programs_through_every_subcommand() {
    let jit = Jit::new().unwrap().verify(true);
    let (mut gradients, mut hvp, mut fit) = (0, 0, 0);
    let cases = 160u64;
    for seed in 0..cases {
        // Depth 1 to 4, largest size 0 to 3, function values in every
        // other case, special values in every fourth.
        let mut data = (seed + 20_000).to_le_bytes().to_vec();
        let knobs = (if seed % 2 == 1 { 0x08 } else { 0 }) | u8::from(seed % 4 == 3);
        data.extend([(seed % 4) as u8, ((seed / 4) % 4) as u8, knobs]);
        data.extend((0..32).map(|k| ((seed * 7 + k) % 11) as u8));
        let outcome = check(&Input::from_bytes(&data), &jit);
        gradients += usize::from(outcome.gradients);
        hvp += usize::from(outcome.hvp);
        fit += usize::from(outcome.fit);
    }
    eprintln!("{cases} programs: {gradients} differentiated, {hvp} Hessian-vector products compared, {fit} fits");
    assert!(gradients as u64 >= cases / 3, "{gradients}");
    assert!(hvp as u64 >= cases / 4, "{hvp}");
    assert!(fit as u64 >= cases / 4, "{fit}");
}
