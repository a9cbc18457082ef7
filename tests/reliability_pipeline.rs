//! The `pipeline` fuzz target's oracle on fixed seeds: generated programs
//! through the interpreter, the JIT, both routes and both constructions of
//! reverse mode, and finite differences; half of the cases with special
//! values (NaN, ±∞, ±0, huge, tiny) among the arguments.

mod support;

use gradlift::Jit;
use support::pipeline_oracle::{check, Input};

#[test]
fn generated_programs_agree_everywhere() {
    let jit = Jit::new().unwrap().verify(true);
    let (mut native, mut gradients, mut fd) = (0, 0, 0);
    let cases = 400u64;
    for seed in 0..cases {
        // The bytes a fuzzer would give: the seed, depth 1 to 5, largest
        // size 0 to 4, and for every other case special values among the
        // reals, chosen by a small LCG of the seed (a quarter of the reals).
        let mut data = seed.to_le_bytes().to_vec();
        data.extend([(seed % 5) as u8, ((seed / 5) % 5) as u8, (seed % 2) as u8]);
        let mut x = seed;
        for _ in 0..64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            data.push((x >> 59) as u8);
        }
        let input = Input::from_bytes(&data);
        assert_eq!(input.config.depth, 1 + (seed % 5) as u32);
        let outcome = check(&input, &jit);
        native += usize::from(outcome.native);
        gradients += usize::from(outcome.gradients);
        fd += outcome.finite_differences;
    }
    eprintln!("{cases} programs: {native} compiled, {gradients} differentiated, {fd} derivatives checked against finite differences");
    assert!(native as u64 >= cases * 9 / 10, "{native}");
    assert!(gradients as u64 >= cases / 3, "{gradients}");
    assert!(fd >= 200, "{fd}");
}

#[test]
fn generated_function_values_agree_everywhere() {
    // Lambdas bound by `let` and called or mapped, lambdas applied where
    // written, primitives bound by `let` (`Config::higher_order`, byte 10's
    // bit 3): inlining removes them before differentiation.
    let jit = Jit::new().unwrap().verify(true);
    let (mut gradients, mut fd) = (0, 0);
    let cases = 150u64;
    for seed in 0..cases {
        let mut data = (seed + 10_000).to_le_bytes().to_vec();
        data.extend([(seed % 5) as u8, ((seed / 5) % 5) as u8, 0x08]);
        let input = Input::from_bytes(&data);
        assert!(input.config.higher_order);
        let outcome = check(&input, &jit);
        gradients += usize::from(outcome.gradients);
        fd += outcome.finite_differences;
    }
    eprintln!("{cases} programs with function values: {gradients} differentiated, {fd} derivatives checked against finite differences");
    assert!(gradients as u64 >= cases / 3, "{gradients}");
    assert!(fd >= 100, "{fd}");
}

/// Inputs on which the fuzz target once failed (docs/reliability.md, bugs
/// 3 and 4): the UNF route's gradient zeroed by a recurring parameter
/// name's activity, and a NaN cotangent times a structural zero that the
/// optimized gradient dropped while the unoptimized one kept it.
#[test]
fn inputs_the_fuzzer_found() {
    let jit = Jit::new().unwrap().verify(true);
    for data in [
        &[
            0x00, 0xca, 0x76, 0x5f, 0x5f, 0x35, 0x00, 0x00, 0xbd, 0x2b, 0x00, 0x01, 0x00, 0x00,
            0x44, 0x00, 0x00, 0x00, 0x00, 0x00,
        ][..],
        &[0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3b, 0x41][..],
        &[0x68, 0xde, 0x2c, 0xf9, 0x80, 0x06, 0x52, 0x7d][..],
        &[
            0x78, 0x32, 0xa9, 0x78, 0x78, 0x2e, 0x06, 0x24, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6,
            0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6, 0xd6,
        ][..],
        // A tie at the point (`max(x2, x2, 0.267)` at `x2 = 0.267`): the
        // oracle's central differences agreed on 0.5, no derivative.
        &[0x3b, 0x2a, 0xf1, 0x3b][..],
    ] {
        check(&Input::from_bytes(data), &jit);
    }
}
