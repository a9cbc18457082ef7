//! The safe API's warm path: `CompiledGradient::call_into` on values
//! allocates nothing once warm (counted by a global allocator that counts
//! the current thread's allocations), for the gradients of the shipped
//! examples with array parameters, and gives what `call` gives.

use gradlift::{Args, GradOptions, Jit, Program, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNT: Cell<Option<usize>> = const { Cell::new(None) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(Some(0)));
    f();
    COUNT.with(|c| c.replace(None)).unwrap()
}

#[test]
fn warm_gradient_calls_on_values_do_not_allocate() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    let jit = Jit::new().unwrap();
    let mut checked = Vec::new();
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let program = Program::parse(file, &text).unwrap();
        let f = program.function(case["fn"].as_str().unwrap()).unwrap();
        if f.signature().ret != gradlift::Type::Real {
            continue;
        }
        let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
        let g = f
            .gradient(None, GradOptions::default())
            .unwrap()
            .compile(&jit)
            .unwrap();
        let (value, grads) = g.call(&args).unwrap();
        let mut out = Value::Real(0.0);
        g.call_into(&args, &mut out).unwrap();
        let n = allocations(|| {
            for _ in 0..20 {
                assert_eq!(
                    g.call_into(&args, &mut out).unwrap().to_bits(),
                    value.to_bits()
                );
            }
        });
        assert_eq!(
            n, 0,
            "{file} at {}: heap allocations in 20 warm calls",
            case["at"]
        );
        let Value::Tuple(parts) = &out else {
            panic!("{out}")
        };
        let got: Vec<Value> = match &parts[1] {
            Value::Tuple(gs) if grads.len() > 1 => gs.to_vec(),
            g => vec![g.clone()],
        };
        assert_eq!(got.len(), grads.len());
        assert!(got.iter().zip(&grads).all(|(a, b)| a.same(b)), "{file}");
        checked.push(file.to_string());
    }
    checked.dedup();
    assert!(checked.len() >= 8, "{checked:?}");
}

#[test]
fn warm_function_calls_on_values_do_not_allocate() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ode.grad")).unwrap();
    let program = Program::parse("ode.grad", &text).unwrap();
    let f = program.function("primal").unwrap();
    let n = f.signature().params.len();
    assert_eq!(n, 2);
    let x = Value::reals(&(0..100).map(|i| 0.01 * i as f64).collect::<Vec<_>>());
    let args = [x, Value::Real(20.0)];
    let compiled = f.compile(&Jit::new().unwrap()).unwrap();
    let expected = compiled.call(&args).unwrap();
    let mut out = Value::Real(0.0);
    compiled.call_into(&args, &mut out).unwrap();
    let count = allocations(|| {
        for _ in 0..20 {
            compiled.call_into(&args, &mut out).unwrap();
        }
    });
    assert_eq!(count, 0);
    assert!(out.same(&expected));
}

#[test]
fn warm_typed_calls_on_slices_do_not_allocate() {
    use gradlift::jit::Arg;
    let text = "def loss(W: [[R; d]; h], b: [R; h], x: [R; d], ks: [Z; m]) -> R =
  reduce (+) 0 (map2 (row, c. tanh(reduce (+) 0 (map2 (*) row x) + c)) W b)
    + reduce (+) 0 (map (k. x[k]) ks)
";
    let jit = Jit::new().unwrap();
    let p = Program::parse("loss.grad", text).unwrap();
    let g = p
        .last_function()
        .unwrap()
        .compile_gradient(
            &jit,
            Some(&["W".into(), "x".into()]),
            GradOptions::default(),
        )
        .unwrap();
    let (h, d) = (9, 13);
    let w: Vec<f64> = (0..h * d).map(|i| (i as f64 * 0.1).cos()).collect();
    let (b, x) = (vec![0.25; h], vec![0.5; d]);
    let ks: [i64; 3] = [1, 4, 12];
    let args = [
        Arg::Reals(&[h, d], &w),
        Arg::Reals(&[h], &b),
        Arg::Reals(&[d], &x),
        Arg::Ints(&[3], &ks),
    ];
    let mut out = vec![0.0; g.result_len(&args).unwrap()];
    g.call_args(&args, &mut out).unwrap();
    let first = out.clone();
    let n = allocations(|| {
        for _ in 0..10 {
            g.call_args(&args, &mut out).unwrap();
        }
    });
    assert_eq!(n, 0, "warm typed calls allocated {n} times");
    assert_eq!(out, first);
}

#[test]
fn warm_typed_calls_with_tuples_do_not_allocate() {
    use gradlift::jit::Arg;
    let text = "def f(p: (R, [R; n]), z: [R; n]) -> R =
  let (a, xs) = p in a * reduce (+) 0 (map2 (*) xs z)
";
    let jit = Jit::new().unwrap();
    let g = Program::parse("f.grad", text)
        .unwrap()
        .last_function()
        .unwrap()
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let (xs, z) = (vec![0.5; 16], vec![0.25; 16]);
    let p = [Arg::Real(2.0), Arg::Reals(&[16], &xs)];
    let args = [Arg::Tuple(&p), Arg::Reals(&[16], &z)];
    let mut out = vec![0.0; g.result_len(&args).unwrap()];
    g.call_args(&args, &mut out).unwrap();
    let first = out.clone();
    let n = allocations(|| {
        for _ in 0..10 {
            g.call_args(&args, &mut out).unwrap();
        }
    });
    assert_eq!(n, 0, "warm typed calls with tuples allocated {n} times");
    assert_eq!(out, first);
}
