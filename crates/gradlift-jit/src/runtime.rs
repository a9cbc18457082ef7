//! The runtime: the functions of this process that native code calls,
//! besides the `libm` shims of the primitives.
//!
//! - `gradlift_schedule_start` and `gradlift_schedule_next`, the machine of
//!   a binomial checkpoint schedule (`checkpoint.rs`);
//! - `gradlift_matmul`, the matrix kernel of [`gradlift_lang::kernels`],
//!   which the interpreter calls too, so that `matmul` rounds alike in
//!   every engine;
//! - `gradlift_split`, which runs the chunks of a loop split across the
//!   thread pool (`split.rs`) and combines the results of a `reduce`'s
//!   chunks from the left.
//!
//! The JIT imports them into every function it compiles; an object file has
//! no runtime to link against, so a program that needs one is refused
//! there, with the construct named.

use cranelift_codegen::ir::{types, AbiParam, FuncRef, GlobalValue, Signature};
use cranelift_codegen::isa::CallConv;

/// The symbols and addresses, in the order of [`signatures`].
pub(crate) const RUNTIME: [(&str, *const u8); 4] = [
    (
        "gradlift_schedule_start",
        crate::checkpoint::schedule_start as *const u8,
    ),
    (
        "gradlift_schedule_next",
        crate::checkpoint::schedule_next as *const u8,
    ),
    ("gradlift_matmul", matmul as *const u8),
    ("gradlift_split", split as *const u8),
];

/// The signatures of [`RUNTIME`]'s functions: every argument a 64-bit
/// word; no result, but `gradlift_split`'s real.
pub(crate) fn signatures(call_conv: CallConv) -> [Signature; 4] {
    let words = |n: usize| {
        let mut sig = Signature::new(call_conv);
        sig.params.extend((0..n).map(|_| AbiParam::new(types::I64)));
        sig
    };
    let mut split = words(5);
    split.returns.push(AbiParam::new(types::F64));
    [words(5), words(3), words(8), split]
}

/// The runtime functions as one function imports them, and the thread
/// pool its products run on.
#[derive(Clone, Copy)]
pub(crate) struct Runtime {
    pub schedule_start: FuncRef,
    pub schedule_next: FuncRef,
    pub matmul: FuncRef,
    pub split: FuncRef,
    /// The word holding the address of the `Jit`'s `rayon::ThreadPool`
    /// (both kept alive by the compiled function), or none: products on
    /// the calling thread.
    pub pool: Option<GlobalValue>,
}

impl Runtime {
    /// From the imports, in the order of [`RUNTIME`].
    pub(crate) fn new(imports: &[FuncRef], pool: Option<GlobalValue>) -> Option<Runtime> {
        match *imports {
            [schedule_start, schedule_next, matmul, split] => Some(Runtime {
                schedule_start,
                schedule_next,
                matmul,
                split,
                pool,
            }),
            _ => None,
        }
    }
}

/// `c = A · B` for `A` (m × k), `B` (k × n), `c` (m × n) row-major, `A`
/// read from `a` by columns when bit 0 of `layouts` is set, `B` from `b`
/// when bit 1 is: [`gradlift_lang::kernels::matmul_raw`], on the threads of
/// `pool` when it is not null.
///
/// # Safety
/// As `matmul_raw`: generated code passes the workspace's operands and a
/// result it allocated, with counts it checked against the operands' row
/// lengths; `pool` is null or the address of a live `rayon::ThreadPool`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn matmul(
    m: i64,
    k: i64,
    n: i64,
    a: *const f64,
    b: *const f64,
    c: *mut f64,
    layouts: i64,
    pool: *const rayon::ThreadPool,
) {
    use gradlift_lang::kernels::Layout;
    let (m, k, n) = (m.max(0) as usize, k.max(0) as usize, n.max(0) as usize);
    let layout = |bit: i64| match layouts & bit {
        0 => Layout::Rows,
        _ => Layout::Columns,
    };
    let (la, lb) = (layout(1), layout(2));
    // The pointers cross into the pool's threads as addresses.
    let (a, b, c) = (a as usize, b as usize, c as usize);
    let run = |threads: usize| {
        // SAFETY: as documented.
        unsafe {
            gradlift_lang::kernels::matmul_raw(
                (m, k, n),
                (a as *const f64, la),
                (b as *const f64, lb),
                c as *mut f64,
                threads,
            )
        }
    };
    // SAFETY: a non-null pool is alive while the code that passes it is.
    match unsafe { pool.as_ref() } {
        Some(pool) if gradlift_lang::kernels::splits(m, k, n) => {
            pool.install(|| run(pool.current_num_threads()))
        }
        _ => run(1),
    }
}

/// Runs `kernel(env, c)` for every chunk `c` in `0..chunks` on the threads
/// of `pool` and, for a `reduce` (`op` a [`split::Combine`] code other
/// than 0), combines their results from the left: `((r₀ op r₁) op r₂) …`,
/// the order of `gradlift_lang::reduce_order`, whatever thread computed
/// each. With `op` 0 (a `map`) the result is 0.
///
/// # Safety
/// `kernel` is a kernel function of the calling code (`split.rs`), `env`
/// the address of its captured values, alive and unchanged until this
/// returns; `pool` the address of a live `rayon::ThreadPool`.
unsafe extern "C" fn split(
    kernel: *const u8,
    env: i64,
    chunks: i64,
    op: i64,
    pool: *const rayon::ThreadPool,
) -> f64 {
    use rayon::prelude::*;
    if chunks >= crate::split::PARALLEL_CHUNKS {
        SPLIT_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    // SAFETY: the generated kernel has this signature (`split.rs`).
    let kernel =
        unsafe { std::mem::transmute::<*const u8, extern "C" fn(i64, i64) -> f64>(kernel) };
    let combine = crate::split::Combine::from_code(op);
    // Every chunk is computed, whether its result is combined or not.
    let fold = |rs: &mut dyn Iterator<Item = f64>| match combine {
        Some(combine) => {
            let first = rs.next().unwrap_or(0.0);
            rs.fold(first, |s, r| combine.apply(s, r))
        }
        None => {
            rs.for_each(drop);
            0.0
        }
    };
    let chunks = chunks.max(0);
    // SAFETY: a non-null pool is alive while the code that passes it is.
    match unsafe { pool.as_ref() } {
        Some(pool) if chunks >= crate::split::PARALLEL_CHUNKS => {
            // Batches of chunks computed in parallel into a buffer on this
            // stack (nothing allocated), their results folded in order.
            const BATCH: i64 = 64;
            let mut results = [0.0f64; BATCH as usize];
            let mut s = None;
            let mut from = 0;
            while from < chunks {
                let m = BATCH.min(chunks - from);
                let batch = &mut results[..m as usize];
                pool.install(|| {
                    batch
                        .par_iter_mut()
                        .enumerate()
                        .for_each(|(c, r)| *r = kernel(env, from + c as i64))
                });
                if let Some(combine) = combine {
                    let mut rs = batch.iter().copied();
                    let first = match s {
                        Some(s) => s,
                        None => rs.next().unwrap_or(0.0),
                    };
                    s = Some(rs.fold(first, |s, r| combine.apply(s, r)));
                }
                from += m;
            }
            s.unwrap_or(0.0)
        }
        // Short: the chunks in turn, on the calling thread.
        _ => fold(&mut (0..chunks).map(|c| kernel(env, c))),
    }
}

/// How many split loops have run in this process (`split_calls`).
static SPLIT_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many loops split across a thread pool (`split.rs`) have run in
/// this process: for tests that show a loop was split.
#[doc(hidden)]
pub fn split_calls() -> usize {
    SPLIT_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}
