//! Once warm, a call allocates nothing on the heap: the workspace, the
//! argument words and the buffers are reused (counted by a global
//! allocator that counts the allocations of the current thread).

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::check_source;
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
