//! The workspace checked once, at entry (`src/guard.rs`): a function
//! whose allocations are all counted exactly fails before it writes
//! anything when the workspace is short of its bound, with the bound as
//! `info`, and runs in exactly the bound; byte counts that overflow are
//! refused at entry. Functions the guard cannot cover keep their checks
//! at each allocation. Either way, every workspace length is an `Ok` or a
//! `WorkspaceTooSmall` asking for more, never a write past the end.

use gradlift_ad::inline::inline;
use gradlift_jit::{Compiled, Jit, Status};
use gradlift_lang::{check_source, Value};

fn compile(source: &str) -> Compiled {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    Jit::new()
        .unwrap()
        .compile(&inline(&checked, last))
        .unwrap()
}

const SENTINEL: u64 = 0x5a5a_5a5a_5a5a_5a5a;

/// A raw call with `bytes` of workspace, followed by one more word; the
/// status, `info`, and the memory (workspace and the word after it),
/// filled with a sentinel before the call.
fn raw_call(f: &Compiled, args: &[i64], out: &mut [f64], bytes: usize) -> (i64, i64, Vec<u64>) {
    let mut memory = vec![SENTINEL; bytes.div_ceil(8) + 1];
    let mut info = -7i64;
    let status = unsafe {
        f.raw()(
            args.as_ptr(),
            out.as_mut_ptr(),
            out.len() as i64,
            memory.as_mut_ptr() as *mut u8,
            bytes as i64,
            &mut info,
        )
    };
    (status, info, memory)
}

const GUARDED: &str = "def f(x: [R; n], y: [R; m], k: size) -> (R, [R; m]) =
  let a = map (v. exp(v)) x in
  let s = reduce (+) 0 a in
  let b = replicate(k, map (v. v / s) a) in
  let c = concat(a, map (v. v * 2) y) in
  (reduce (+) 0 (map (r. reduce (+) 0 r) b) + reduce (+) 0 (map (v. v * s) c) + s * a[0], map (v. v + s) y)
";

fn arguments(n: usize, m: usize, k: i64) -> (Vec<f64>, Vec<f64>, Vec<Value>) {
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).sin()).collect();
    let y: Vec<f64> = (0..m).map(|i| (i as f64 * 0.7).cos()).collect();
    let values = vec![Value::reals(&x), Value::reals(&y), Value::Real(k as f64)];
    (x, y, values)
}

#[test]
fn a_guarded_function_needs_its_whole_bound_and_writes_nothing_short_of_it() {
    let f = compile(GUARDED);
    let vars: Vec<&str> = f.signature().size_vars.iter().map(|v| &**v).collect();
    for (n, m, k) in [(1usize, 1usize, 1i64), (4, 3, 2), (9, 1, 5), (2, 7, 0)] {
        let (x, y, values) = arguments(n, m, k);
        let sizes: Vec<i64> = vars
            .iter()
            .map(|v| match *v {
                "n" => n as i64,
                "m" => m as i64,
                _ => k,
            })
            .collect();
        let bound = f.workspace_bound().at(&sizes).unwrap() as usize;
        assert!(bound > 0);
        let mut args = sizes.clone();
        args.extend([x.as_ptr() as i64, y.as_ptr() as i64]);
        let want = f.call(&values).unwrap();
        let mut out = vec![0.0; 1 + m];
        // One word short: refused at entry, `info` the bound, nothing written.
        let (status, info, memory) = raw_call(&f, &args, &mut out, bound - 8);
        assert_eq!(
            (status, info),
            (Status::WorkspaceTooSmall as i64, bound as i64)
        );
        assert!(
            memory.iter().all(|&w| w == SENTINEL),
            "the workspace was written: {memory:x?} bound {bound} ({n}, {m}, {k})"
        );
        // The bound exactly: the value of the safe call, the word after
        // the workspace untouched.
        let (status, _, memory) = raw_call(&f, &args, &mut out, bound);
        assert_eq!(status, Status::Ok as i64);
        assert_eq!(memory[bound / 8], SENTINEL);
        let Value::Tuple(parts) = &want else {
            panic!("a pair")
        };
        assert!(Value::Real(out[0]).same(&parts[0]));
        assert!(Value::reals(&out[1..]).same(&parts[1]));
    }
}

/// Every workspace length from 0 to the bound, by words: `Ok`, or
/// `WorkspaceTooSmall` asking for more than was given; the word after the
/// workspace is never written.
fn sweep(f: &Compiled, args: &[i64], out_len: usize, bound: usize) -> usize {
    let mut first_ok = None;
    for words in 0..=bound / 8 {
        let mut out = vec![0.0; out_len];
        let (status, info, memory) = raw_call(f, args, &mut out, words * 8);
        assert_eq!(memory[words], SENTINEL, "written past {words} words");
        match Status::from_code(status) {
            Some(Status::Ok) => {
                first_ok.get_or_insert(words * 8);
            }
            Some(Status::WorkspaceTooSmall) => assert!(info as usize > words * 8),
            s => panic!("status {s:?} at {words} words"),
        }
    }
    first_ok.expect("the bound is enough")
}

#[test]
fn every_workspace_length_is_ok_or_asks_for_more_guarded_or_not() {
    let f = compile(GUARDED);
    let (x, y, _) = arguments(5, 3, 2);
    let vars: Vec<&str> = f.signature().size_vars.iter().map(|v| &**v).collect();
    let sizes: Vec<i64> = vars
        .iter()
        .map(|v| match *v {
            "n" => 5,
            "m" => 3,
            _ => 2,
        })
        .collect();
    let bound = f.workspace_bound().at(&sizes).unwrap() as usize;
    let mut args = sizes;
    args.extend([x.as_ptr() as i64, y.as_ptr() as i64]);
    // Guarded: nothing short of the bound runs.
    assert_eq!(sweep(&f, &args, 4, bound), bound);

    // Not guarded: a length the code computes as `1 + max(0, n - 1)`,
    // which its type says is `n` (it is, once `x[0]` has not failed),
    // keeps the check at each allocation, so it runs in less than its
    // bound (which counts both sides of the `if`).
    let g = compile(
        "def g(x: [R; n], c: R) -> R =
  let y = concat([x[0]], map2 (*) (shift1L x) (shift1R x)) in
  let z = if c > 0 then map (v. v * c) y else map (v. v - c) y in
  reduce (+) 0 (map2 (*) y z)",
    );
    let x: Vec<f64> = (0..6).map(|i| i as f64 * 0.5 + 1.0).collect();
    let c = [2.0f64];
    let args = [6, x.as_ptr() as i64, c.as_ptr() as i64];
    let bound = g.workspace_bound().at(&[6]).unwrap() as usize;
    let least = sweep(&g, &args, 1, bound);
    assert!(least < bound, "{least} {bound}");
}

#[test]
fn byte_counts_of_allocations_that_overflow_are_refused_at_entry() {
    // Every size is allowed (2^40); the bytes of `b` (2^40 · 2^40 · 8)
    // are not: refused before anything is allocated or written.
    let f = compile(GUARDED);
    let x = [1.0f64; 2];
    let y = [1.0f64; 2];
    let vars: Vec<&str> = f.signature().size_vars.iter().map(|v| &**v).collect();
    let sizes: Vec<i64> = vars
        .iter()
        .map(|v| match *v {
            "k" => 1 << 40,
            _ => 2,
        })
        .collect();
    // n = 2 elements in each row of `b`, 2^40 rows: 2^44 · 8 bytes, a
    // count that fits; the workspace does not.
    let mut args = sizes.clone();
    args.extend([x.as_ptr() as i64, y.as_ptr() as i64]);
    let mut out = [0.0; 3];
    let (status, info, memory) = raw_call(&f, &args, &mut out, 64);
    assert_eq!(status, Status::WorkspaceTooSmall as i64);
    assert_eq!(info as u64, f.workspace_bound().at(&sizes).unwrap());
    assert!(memory.iter().all(|&w| w == SENTINEL));
    // Rows of 2^40 reals and 2^40 of them: 2^83 bytes overflow.
    let h = compile(
        "def h(x: [R; n], k: size) -> R =
  let rows = replicate(k, map (v. v * 2) x) in
  reduce (+) 0 (map (r. r[0] + r[1]) rows) + rows[0][0]",
    );
    let xs = [1.0f64; 4];
    let args = [1i64 << 40, 1 << 40, xs.as_ptr() as i64];
    let vars: Vec<&str> = h.signature().size_vars.iter().map(|v| &**v).collect();
    assert_eq!(vars, ["n", "k"]);
    let mut out = [0.0];
    let (status, info, memory) = raw_call(&h, &args, &mut out, 64);
    // The parameter `x` claims 2^40 reals: its byte count fits, and the
    // argument is never read before the entry check refuses the call.
    assert_eq!((status, info), (Status::SizeOverflow as i64, 0));
    assert!(memory.iter().all(|&w| w == SENTINEL));
}
