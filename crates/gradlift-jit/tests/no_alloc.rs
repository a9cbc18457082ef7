//! Once warm, a call allocates nothing on the heap: the workspace, the
//! argument words and the buffers are reused (counted by a global
//! allocator that counts the allocations of the current thread).

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, Value};
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

#[test]
fn warm_calls_do_not_allocate() {
    let source = "def f(A: [R; n], B: [R; n]) -> [R; n+1] = \
                  scanl (+) 0 (map2 (x, y. x * exp(y)) A (concat(shift1L A, [1])))";
    let checked = check_source("<test>", source).unwrap();
    let f = Jit::new().unwrap().compile(&inline(&checked, 0)).unwrap();
    let a: Vec<f64> = (0..1000).map(|i| i as f64 * 0.001).collect();
    let b: Vec<f64> = (0..1000).map(|i| 1.0 - i as f64 * 0.001).collect();
    let mut out = vec![0.0; 1001];
    // The first call grows the workspace.
    f.call_flat(&[1000], &[&a, &b], &mut out).unwrap();
    COUNT.with(|c| c.set(Some(0)));
    for _ in 0..100 {
        f.call_flat(&[1000], &[&a, &b], &mut out).unwrap();
    }
    let allocations = COUNT.with(|c| c.replace(None)).unwrap();
    assert_eq!(allocations, 0, "heap allocations in 100 warm calls");
    assert_eq!(out[0], 0.0);
    assert!(out[1000].is_finite());
}

#[test]
fn warm_calls_on_values_do_not_allocate() {
    // Nested arrays, a tuple result and a size parameter: the size binding,
    // the flattening and the result all reuse their buffers.
    let source = "def f(X: [[R; d]; m], w: [R; d], k: size) -> ([R; m], (R, [[R; d]; m])) = \
                  let z = map (row. reduce (+) 0 (map2 (*) row w)) X in \
                  (map (v. v * k) z, (reduce (+) 0 z, map (row. map2 (a, b. a * exp(b)) row w) X))";
    let checked = check_source("<test>", source).unwrap();
    let f = Jit::new().unwrap().compile(&inline(&checked, 0)).unwrap();
    let (m, d) = (50, 8);
    let x = Value::array(
        (0..m)
            .map(|i| {
                Value::reals(
                    &(0..d)
                        .map(|j| ((i * d + j) as f64).sin())
                        .collect::<Vec<_>>(),
                )
            })
            .collect(),
    );
    let w = Value::reals(&(0..d).map(|j| 0.1 * j as f64).collect::<Vec<_>>());
    let args = [x, w, Value::Real(3.0)];
    let expected = f.call(&args).unwrap();
    let mut out = Value::Real(0.0);
    // The first call builds `out` and grows the workspace.
    f.call_into(&args, &mut out).unwrap();
    assert!(out.same(&expected));
    COUNT.with(|c| c.set(Some(0)));
    for _ in 0..100 {
        f.call_into(&args, &mut out).unwrap();
    }
    let allocations = COUNT.with(|c| c.replace(None)).unwrap();
    assert_eq!(allocations, 0, "heap allocations in 100 warm calls");
    assert!(out.same(&expected), "{out} != {expected}");
    // A result of another shape is replaced, not misread.
    let mut other = Value::reals(&[1.0, 2.0]);
    f.call_into(&args, &mut other).unwrap();
    assert!(other.same(&expected));
    // A shared result is not written through: the other owner keeps it.
    let shared = out.clone();
    f.call_into(&args, &mut out).unwrap();
    assert!(shared.same(&expected) && out.same(&expected));
    // Bad arguments are still errors, explained by the general binder.
    let e = f
        .call_into(
            &[Value::reals(&[1.0]), Value::reals(&[1.0]), Value::Real(1.0)],
            &mut out,
        )
        .unwrap_err();
    assert!(matches!(e, gradlift_jit::CallError::Arguments(_)), "{e}");
}

#[test]
fn a_first_call_allocates_its_workspace_once() {
    // The workspace is sized by the bound computed at compile time, not
    // grown by doubling while the code asks for more: the first call at
    // new sizes makes as many allocations at n = 10⁶ (megabytes of
    // workspace) as at n = 10.
    let source = "def f(A: [R; n], B: [R; n]) -> R = \
                  let S = scanl (+) 0 (map2 (x, y. x * exp(y)) A B) in \
                  let T = map2 (s, a. s * a) (shift1L S) A in \
                  reduce (+) 0 T + reduce max (-inf) T";
    let checked = check_source("<test>", source).unwrap();
    let jit = Jit::new().unwrap();
    let first_call = |n: usize| {
        let f = jit.compile(&inline(&checked, 0)).unwrap();
        let a: Vec<f64> = (0..n).map(|i| (i % 13) as f64 * 0.01).collect();
        let mut out = [0.0];
        COUNT.with(|c| c.set(Some(0)));
        f.call_flat(&[n as i64], &[&a, &a], &mut out).unwrap();
        let allocations = COUNT.with(|c| c.replace(None)).unwrap();
        let bytes = f.workspace_bound().at(&[n as i64]).unwrap();
        (allocations, bytes, out[0])
    };
    let (small, small_bytes, _) = first_call(10);
    let (large, large_bytes, v) = first_call(1_000_000);
    assert!(v.is_finite());
    // At least `T`, stored (it is read twice): n reals.
    assert!(
        small_bytes >= 80 && large_bytes >= 8_000_000,
        "{small_bytes}, {large_bytes}"
    );
    assert_eq!(
        small, large,
        "allocations of a first call at n = 10 and 10⁶"
    );
}

#[test]
fn a_first_call_without_size_variables_allocates_its_workspace_once() {
    // The same, with the lengths in the text: the bound is a constant.
    let first_call = |n: usize| {
        let source = format!(
            "def f(x: R) -> R = \
             let S = scanl (+) 0 (map (i. i * x) (iota({n}))) in \
             let T = map2 (s, a. s * a) (shift1L S) (iota({n})) in \
             reduce (+) 0 T + reduce max (-inf) T"
        );
        let checked = check_source("<test>", &source).unwrap();
        let f = Jit::new().unwrap().compile(&inline(&checked, 0)).unwrap();
        let mut out = [0.0];
        COUNT.with(|c| c.set(Some(0)));
        f.call_flat(&[], &[&[0.5]], &mut out).unwrap();
        let allocations = COUNT.with(|c| c.replace(None)).unwrap();
        (allocations, f.workspace_bound().at(&[]).unwrap(), out[0])
    };
    let (small, small_bytes, _) = first_call(10);
    let (large, large_bytes, v) = first_call(1_000_000);
    assert!(v.is_finite());
    assert!(
        small_bytes >= 80 && large_bytes >= 8_000_000,
        "{small_bytes}, {large_bytes}"
    );
    assert_eq!(
        small, large,
        "allocations of a first call at n = 10 and 10⁶"
    );
}
