//! The `pipeline` fuzz target's oracle on fixed seeds: generated programs
//! through the interpreter, the JIT, both routes and both constructions of
//! reverse mode, and finite differences; half of the cases with special
//! values (NaN, ±∞, ±0, huge, tiny) among the arguments.

mod support;

use gradlift::lang::testing::Config;
use gradlift::Jit;
use support::pipeline_oracle::{check, Input};

#[test]
fn generated_programs_agree_everywhere() {
    let jit = Jit::new().unwrap().verify(true);
    let (mut native, mut gradients, mut fd) = (0, 0, 0);
    let cases = 400u64;
    for seed in 0..cases {
        // Depth 1 to 5, largest size 0 to 4; every other case has special
        // values, chosen by a small LCG of the seed.
        let config = Config {
            depth: 1 + (seed % 5) as u32,
            max_size: ((seed / 5) % 5) as i64,
        };
        let picks = (seed % 2 == 1).then(|| {
            let mut x = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (0..64)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 59) as u8 // 0 to 31: a quarter of the reals special
                })
                .collect()
        });
        let outcome = check(
            &Input {
                seed,
                config,
                picks,
            },
            &jit,
        );
        native += usize::from(outcome.native);
        gradients += usize::from(outcome.gradients);
        fd += outcome.finite_differences;
    }
    eprintln!("{cases} programs: {native} compiled, {gradients} differentiated, {fd} derivatives checked against finite differences");
    assert!(native as u64 >= cases * 9 / 10, "{native}");
    assert!(gradients as u64 >= cases / 3, "{gradients}");
    assert!(fd >= 200, "{fd}");
}
