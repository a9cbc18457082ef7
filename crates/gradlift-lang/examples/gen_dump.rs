//! Prints the generated case for a seed: `cargo run --example gen_dump --features testing -- SEED [DEPTH] [higher-order]`.
use gradlift_lang::testing::{generate, Config};
fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let depth: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(4);
    let higher_order = args.next().is_some_and(|s| s == "higher-order");
    let case = generate(
        seed,
        &Config {
            depth,
            max_size: 4,
            higher_order,
        },
    );
    println!("{}", case.text());
    match gradlift_lang::check_module(case.module.clone()) {
        Ok(_) => println!("# type-checks"),
        Err(e) => println!("# {e}"),
    }
}
