//! The Rust code shown in docs/optimizers.md is the code of
//! examples/fit_logistic.rs, so the page cannot drift from a program that
//! builds and runs.

#[test]
fn the_page_shows_the_example_code() {
    let page = include_str!("../../../docs/optimizers.md");
    let example = include_str!("../../../examples/fit_logistic.rs");
    let mut blocks = 0;
    let mut rest = page;
    while let Some(start) = rest.find("```rust\n") {
        let body = &rest[start + "```rust\n".len()..];
        let end = body.find("```").expect("a closed code block");
        let code = &body[..end];
        assert!(
            example.contains(code),
            "this block of docs/optimizers.md is not in examples/fit_logistic.rs:\n{code}"
        );
        blocks += 1;
        rest = &body[end + 3..];
    }
    assert_eq!(blocks, 3, "the page shows three pieces of the example");
}
