//! The compile cache of a `Jit`: a repeated parse or compile of the same
//! text, function and options is a lookup that returns the same code; a
//! change to any of them compiles anew; errors are not kept; a setting of
//! the `Jit` empties it.

use gradlift::{GradOptions, Jit, Name, Program, Value};

const LOSS: &str = "def loss(w: [R; n], x: [R; n]) -> R =
  reduce (+) 0 (map2 (a, b. (a - b) * (a - b)) w x)
";

fn args() -> Vec<Value> {
    vec![
        Value::reals(&[1.0, 2.0, 3.0]),
        Value::reals(&[0.5, -1.0, 4.0]),
    ]
}

#[test]
fn a_repeated_define_is_a_lookup_that_returns_the_same_code() {
    let jit = Jit::new().unwrap();
    let first = {
        let p = Program::parse_in(&jit, "loss.grad", LOSS).unwrap();
        let f = p.function("loss").unwrap();
        f.compile_gradient(&jit, None, GradOptions::default())
            .unwrap()
    };
    let misses = jit.cache_stats().misses;
    assert_eq!(misses, 2, "a parse and a gradient built");
    let again = {
        let p = Program::parse_in(&jit, "loss.grad", LOSS).unwrap();
        let f = p.function("loss").unwrap();
        f.compile_gradient(&jit, None, GradOptions::default())
            .unwrap()
    };
    let stats = jit.cache_stats();
    assert_eq!((stats.hits, stats.misses), (2, 2));
    assert_eq!(
        first.native().raw() as usize,
        again.native().raw() as usize,
        "the same code"
    );
    let (v1, g1) = first.call(&args()).unwrap();
    let (v2, g2) = again.call(&args()).unwrap();
    assert_eq!(v1.to_bits(), v2.to_bits());
    assert_eq!(format!("{g1:?}"), format!("{g2:?}"));
    assert_eq!(v1, 0.25 + 9.0 + 1.0);

    // The path through `gradient(…)?.compile(…)` finds the same entry.
    let p = Program::parse("loss.grad", LOSS).unwrap();
    let f = p.function("loss").unwrap();
    let third = f
        .gradient(None, GradOptions::default())
        .unwrap()
        .compile(&jit)
        .unwrap();
    assert_eq!(first.native().raw() as usize, third.native().raw() as usize);
}

#[test]
fn another_text_function_wrt_or_option_compiles_anew() {
    let jit = Jit::new().unwrap();
    let p = Program::parse_in(&jit, "loss.grad", LOSS).unwrap();
    let f = p.function("loss").unwrap();
    let all = f
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let w = [Name::from("w")];
    let only_w = f
        .compile_gradient(&jit, Some(&w), GradOptions::default())
        .unwrap();
    assert_eq!(only_w.call(&args()).unwrap().1.len(), 1);
    assert_eq!(all.call(&args()).unwrap().1.len(), 2);
    let unoptimized = GradOptions {
        optimize: false,
        ..GradOptions::default()
    };
    let _ = f.compile_gradient(&jit, Some(&w), unoptimized);
    let value = f.compile(&jit).unwrap();
    assert_eq!(value.call(&args()).unwrap().as_real(), Some(10.25));
    let other = LOSS.replace("(a - b) * (a - b)", "(a - b) * (a - b) * 2");
    let p2 = Program::parse_in(&jit, "loss.grad", &other).unwrap();
    let (v, _) = p2
        .function("loss")
        .unwrap()
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap()
        .call(&args())
        .unwrap();
    assert_eq!(v, 20.5);
    let stats = jit.cache_stats();
    assert_eq!(stats.hits, 0, "{stats:?}");
    assert_eq!(stats.entries as u64, stats.misses, "{stats:?}");
}

#[test]
fn errors_are_not_kept_and_settings_empty_the_cache() {
    let jit = Jit::new().unwrap();
    for _ in 0..2 {
        let e = Program::parse_in(&jit, "bad.grad", "def f(x: R) -> R = y").unwrap_err();
        assert!(e.to_string().contains("bad.grad"), "{e}");
    }
    assert_eq!(jit.cache_stats().entries, 0);
    let _ = Program::parse_in(&jit, "loss.grad", LOSS).unwrap();
    assert_eq!(jit.cache_stats().entries, 1);
    let jit = jit.threads(1);
    assert_eq!(jit.cache_stats().entries, 0);
    let jit = jit.cache(false);
    for _ in 0..2 {
        let p = Program::parse_in(&jit, "loss.grad", LOSS).unwrap();
        p.function("loss").unwrap().compile(&jit).unwrap();
    }
    assert_eq!(jit.cache_stats().entries, 0);
    assert_eq!(jit.cache_stats().hits, 0);
}

#[test]
fn one_cached_gradient_serves_many_threads() {
    let jit = Jit::new().unwrap();
    let p = Program::parse_in(&jit, "loss.grad", LOSS).unwrap();
    let g = p
        .function("loss")
        .unwrap()
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let want = format!("{:?}", g.call(&args()).unwrap());
    std::thread::scope(|s| {
        for _ in 0..4 {
            let jit = &jit;
            let want = &want;
            s.spawn(move || {
                for _ in 0..50 {
                    let p = Program::parse_in(jit, "loss.grad", LOSS).unwrap();
                    let g = p
                        .function("loss")
                        .unwrap()
                        .compile_gradient(jit, None, GradOptions::default())
                        .unwrap();
                    assert_eq!(&format!("{:?}", g.call(&args()).unwrap()), want);
                }
            });
        }
    });
    assert_eq!(jit.cache_stats().entries, 2);
}
