//! The safe API checks shapes and reports run-time errors as `Err`; the
//! raw ABI works exactly as `docs/abi.md` says; a compiled function is
//! `Send + Sync` and gives the same results from several threads.

use gradlift_ad::inline::inline;
use gradlift_jit::{CallError, Compiled, Jit, Status};
use gradlift_lang::{check_source, Value};

fn compile(source: &str) -> Compiled {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    Jit::new()
        .unwrap()
        .compile(&inline(&checked, last))
        .unwrap()
}

#[test]
fn shape_mismatch_is_an_error() {
    let dot = compile("def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)");
    let err = dot.call(&[Value::reals(&[1.0, 2.0]), Value::reals(&[1.0])]);
    assert!(matches!(err, Err(CallError::Arguments(_))), "{err:?}");
    let err = dot.call(&[Value::Real(1.0), Value::reals(&[1.0])]);
    assert!(matches!(err, Err(CallError::Arguments(_))), "{err:?}");
    let mut out = [0.0];
    let err = dot.call_flat(&[3], &[&[1.0, 2.0], &[1.0, 2.0, 3.0]], &mut out);
    assert!(matches!(err, Err(CallError::Arguments(_))), "{err:?}");
    let err = dot.call_flat(&[-1], &[&[], &[]], &mut out);
    assert!(matches!(err, Err(CallError::Arguments(_))), "{err:?}");
}

#[test]
fn run_time_errors_are_statuses() {
    let cases = [
        (
            "def f(a: [R; n]) -> R = (shift1L a)[2]",
            Status::IndexOutOfBounds,
        ),
        (
            "def f(a: [R; n]) -> R = reduce (+) 0 (take(5, a))",
            Status::TakeDropOutOfRange,
        ),
        (
            "def f(a: [R; n]) -> R = real(len(a) // (len(a) - 3))",
            Status::DivisionByZero,
        ),
        (
            "def f(a: [R; n]) -> R = real(7 % (n - 3)) * a[0]",
            Status::DivisionByZero,
        ),
        (
            "def f(a: [R; n]) -> R = real(int(a[0] / 0.0))",
            Status::IntOutOfRange,
        ),
        (
            "def f(a: [R; n]) -> R = real(int(a[0] * 1e300))",
            Status::IntOutOfRange,
        ),
    ];
    for (source, status) in cases {
        let f = compile(source);
        let got = f.call(&[Value::reals(&[1.0, 2.0, 3.0])]);
        assert_eq!(got.err(), Some(CallError::Status(status)), "{source}");
    }
}

#[test]
fn a_huge_size_is_refused_not_allocated() {
    // A result past the limit: refused, nothing allocated.
    let f = compile("def f(s: size) -> [R; s] = map (i. real(i) * 2) (iota(s))");
    let got = f.call(&[Value::Real(1e11)]);
    assert!(
        matches!(got, Err(CallError::OutputLimit { needed, limit })
            if needed == 8e11 as u64 && limit == gradlift_jit::DEFAULT_MAX_WORKSPACE),
        "{got:?}"
    );
    // A stored array past the limit: refused, nothing allocated.
    let f = compile("def f(s: size) -> R = len(iota(s))");
    let got = f.call(&[Value::Real(1e11)]);
    assert!(
        matches!(got, Err(CallError::WorkspaceLimit { needed, limit })
            if needed >= 8e11 as u64 && limit == gradlift_jit::DEFAULT_MAX_WORKSPACE),
        "{got:?}"
    );
    // A size past 2^40 is not a size.
    let f = compile("def f(s: size) -> R = reduce (+) 0 (iota(s))");
    let got = f.call(&[Value::Real(1e13)]);
    assert!(matches!(got, Err(CallError::Arguments(_))), "{got:?}");
    assert_eq!(f.call(&[Value::Real(4.0)]).unwrap().as_real(), Some(6.0));
}

#[test]
fn a_range_read_by_a_loop_takes_no_workspace() {
    // 600 million steps would need 4.8 GB if the range were stored; it is
    // not, so the call runs under a limit of one kilobyte.
    let source = "def f(x: R, s: size) -> R = foldl (a, i. a * 0.5 + 1) x (iota(s))";
    let checked = gradlift_lang::check_source("<test>", source).unwrap();
    let closed = gradlift_ad::inline::inline(&checked, 0);
    let f = gradlift_jit::Jit::new()
        .unwrap()
        .max_workspace(1024)
        .compile(&closed)
        .unwrap();
    let got = f.call(&[Value::Real(1.0), Value::Real(6e8)]).unwrap();
    assert_eq!(got.as_real(), Some(2.0));
    assert!(f.workspace_bound().at(&[600_000_000]).unwrap() <= 1024);
}

#[test]
fn the_workspace_limit_is_a_setting() {
    // The prefix sums are stored: n + 1 reals of workspace.
    let source = "def f(A: [R; n]) -> R = let v = scanl (+) 0 A in reduce (+) 0 (map2 (*) (shift1L v) A) + reduce max (-inf) v";
    let checked = gradlift_lang::check_source("<test>", source).unwrap();
    let closed = gradlift_ad::inline::inline(&checked, 0);
    let small = gradlift_jit::Jit::new().unwrap().max_workspace(4000);
    let f = small.compile(&closed).unwrap();
    // 400 reals fit in 4000 bytes; 1000 do not.
    let ones = |n: usize| vec![Value::reals(&vec![1.0; n])];
    assert_eq!(f.call(&ones(400)).unwrap().as_real(), Some(80600.0));
    let got = f.call(&ones(1000));
    assert!(
        matches!(got, Err(CallError::WorkspaceLimit { needed, limit: 4000 }) if needed >= 8000),
        "{got:?}"
    );
    let message = got.unwrap_err().to_string();
    assert!(
        message.contains("more than its limit of 4000 bytes"),
        "{message}"
    );
}

#[test]
fn four_threads_agree_with_one() {
    let f = compile(
        "def g(X: [[R; d]; m], w: [R; d]) -> [R; m] = map (x. tanh(reduce (+) 0 (map2 (*) x w))) X",
    );
    let args = |k: usize| {
        let rows = (0..50)
            .map(|i| Value::reals(&[(i + k) as f64 * 0.01, 1.0, -0.5]))
            .collect();
        vec![Value::array(rows), Value::reals(&[0.3, -0.2, 0.1])]
    };
    let alone: Vec<Value> = (0..4).map(|k| f.call(&args(k)).unwrap()).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let f = &f;
                s.spawn(move || (0..200).map(|_| f.call(&args(k)).unwrap()).last().unwrap())
            })
            .collect();
        for (k, h) in handles.into_iter().enumerate() {
            assert!(h.join().unwrap().same(&alone[k]));
        }
    });
}

/// The example of `docs/abi.md`, step by step.
#[test]
fn raw_abi_as_documented() {
    let f = compile(
        "def f(X: [[R; d]; m], p: (R, R), s: size) -> ([R; m], R) = \
         (map (x. reduce (+) 0 x * fst p) X, snd p * s)",
    );
    // Size variables in the order of `signature().size_vars`: m, d, s.
    let order: Vec<&str> = f.signature().size_vars.iter().map(|v| &**v).collect();
    assert_eq!(order, ["m", "d", "s"]);
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // m = 2 rows of d = 3, row-major
    let p = [10.0, 0.5]; // a tuple, flattened
    let mut args: [i64; 5] = [2, 3, 7, x.as_ptr() as i64, p.as_ptr() as i64];
    let mut out = [0.0f64; 3]; // [R; m] then R
    let mut workspace = vec![0u64; 4]; // 32 bytes, 8-aligned
    let mut info = 0i64;
    let raw = f.raw();
    let mut status;
    loop {
        status = unsafe {
            raw(
                args.as_ptr(),
                out.as_mut_ptr(),
                out.len() as i64,
                workspace.as_mut_ptr() as *mut u8,
                (workspace.len() * 8) as i64,
                &mut info,
            )
        };
        if status != Status::WorkspaceTooSmall as i64 {
            break;
        }
        assert!(info as usize > workspace.len() * 8);
        workspace.resize((info as usize).div_ceil(8), 0);
    }
    assert_eq!(status, Status::Ok as i64);
    assert_eq!(out, [60.0, 150.0, 3.5]);
    // Or sized once by the bound, for the size words: no status 1.
    let bytes = f.workspace_bound().at(&args[..3]).unwrap();
    let mut sized = vec![0u64; bytes.div_ceil(8) as usize];
    let status = unsafe {
        raw(
            args.as_ptr(),
            out.as_mut_ptr(),
            out.len() as i64,
            sized.as_mut_ptr() as *mut u8,
            (sized.len() * 8) as i64,
            &mut info,
        )
    };
    assert_eq!(status, Status::Ok as i64);
    assert_eq!(out, [60.0, 150.0, 3.5]);
    // Too small an output buffer: status 2, `info` the reals needed.
    let status = unsafe {
        raw(
            args.as_ptr(),
            out.as_mut_ptr(),
            2,
            workspace.as_mut_ptr() as *mut u8,
            (workspace.len() * 8) as i64,
            &mut info,
        )
    };
    assert_eq!((status, info), (Status::OutputTooSmall as i64, 3));
    // A size variable above 2^40: status 6, `info` its index.
    args[1] = 1 << 41;
    let status = unsafe {
        raw(
            args.as_ptr(),
            out.as_mut_ptr(),
            out.len() as i64,
            workspace.as_mut_ptr() as *mut u8,
            (workspace.len() * 8) as i64,
            &mut info,
        )
    };
    assert_eq!((status, info), (Status::BadSize as i64, 1));
}

#[test]
fn byte_counts_that_overflow_fail_before_memory_is_touched() {
    // Each size is allowed (2^40), the byte count of the parameter is not
    // (2^123): the code must stop with SizeOverflow before reading the
    // argument, which is far shorter than its type claims.
    let f = compile("def f(A: [[[R; a]; b]; c]) -> R = A[0][0][0]");
    let data = [1.0f64; 4];
    let args: [i64; 4] = [1 << 40, 1 << 40, 1 << 40, data.as_ptr() as i64];
    let mut out = [0.0f64; 1];
    let mut workspace = vec![0u64; 16];
    let mut info = -5i64;
    let status = unsafe {
        f.raw()(
            args.as_ptr(),
            out.as_mut_ptr(),
            1,
            workspace.as_mut_ptr() as *mut u8,
            (workspace.len() * 8) as i64,
            &mut info,
        )
    };
    assert_eq!((status, info), (Status::SizeOverflow as i64, 0));
}
