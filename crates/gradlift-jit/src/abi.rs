//! The native ABI of a compiled function (documented for users in
//! `docs/abi.md`).
//!
//! ```c
//! int64_t f(const int64_t *args, double *out, int64_t out_len,
//!           uint8_t *workspace, int64_t workspace_len, int64_t *info);
//! ```
//!
//! `args` holds first the value of every size variable (in the order of
//! [`gradlift_lang::closed::Closed::size_vars`]), then, for every value
//! parameter in order, a pointer to its data: its reals flattened row-major
//! (tuples component by component). The result is written flattened to
//! `out`. The return value is a [`Status`]; for some statuses `*info` holds
//! a detail (the workspace bytes needed, the output length needed, the
//! index of a bad size variable).

/// The status a compiled function returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i64)]
pub enum Status {
    /// Success: the result is in `out`.
    Ok = 0,
    /// The workspace is too small; `*info` is a lower bound of the bytes
    /// needed. Grow it (doubling is fine) and call again.
    WorkspaceTooSmall = 1,
    /// `out_len` is too small; `*info` is the number of reals needed.
    OutputTooSmall = 2,
    /// `map2` of arrays of different lengths, or `concat` of arrays whose
    /// rows differ.
    LengthMismatch = 3,
    /// An index out of bounds.
    IndexOutOfBounds = 4,
    /// `take` or `drop` of more elements than the array has.
    TakeDropOutOfRange = 5,
    /// A size that is negative, not a whole number, or above 2⁴⁰ (a size
    /// variable in `args`, an `iota` or `replicate` count, a parameter's
    /// length); `*info` is the index of the size variable when it is one.
    BadSize = 6,
    /// A byte count that overflows 63 bits.
    SizeOverflow = 7,
    /// An array computed in a loop has a different shape in different
    /// iterations (the type system rules this out; checked for safety).
    ShapeMismatch = 8,
    /// An integer divided by 0 (`//` or `%`).
    DivisionByZero = 9,
    /// `int(x)` of a NaN or of a real beyond ±2⁶³.
    IntOutOfRange = 10,
    /// A `while` loop did not stop within the iteration limit
    /// (`Jit::max_iterations`).
    IterationLimit = 11,
}

impl Status {
    /// Every status, by code.
    pub const ALL: [Status; 12] = [
        Status::Ok,
        Status::WorkspaceTooSmall,
        Status::OutputTooSmall,
        Status::LengthMismatch,
        Status::IndexOutOfBounds,
        Status::TakeDropOutOfRange,
        Status::BadSize,
        Status::SizeOverflow,
        Status::ShapeMismatch,
        Status::DivisionByZero,
        Status::IntOutOfRange,
        Status::IterationLimit,
    ];

    /// The status with this code.
    pub fn from_code(code: i64) -> Option<Status> {
        Status::ALL.into_iter().find(|s| *s as i64 == code)
    }

    /// What went wrong, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Status::Ok => "success",
            Status::WorkspaceTooSmall => "the workspace is too small",
            Status::OutputTooSmall => "the output buffer is too small",
            Status::LengthMismatch => "arrays of different lengths",
            Status::IndexOutOfBounds => "an index is out of bounds",
            Status::TakeDropOutOfRange => "`take` or `drop` beyond the end of an array",
            Status::BadSize => "a size is negative, not a whole number, or too large",
            Status::SizeOverflow => "a byte count overflows",
            Status::ShapeMismatch => "rows of different shapes",
            Status::DivisionByZero => "an integer divided by zero (`//` or `%`)",
            Status::IntOutOfRange => "`int` of a NaN or of a real beyond the integers (±2^63)",
            Status::IterationLimit => "a `while` loop did not stop within the iteration limit",
        }
    }
}

/// The largest length an array may have (2⁴⁰, as [`gradlift_lang::Size::LIMIT`]).
pub const MAX_LEN: i64 = 1 << 40;

/// The signature of a compiled function.
pub type RawFn = unsafe extern "C" fn(
    args: *const i64,
    out: *mut f64,
    out_len: i64,
    workspace: *mut u8,
    workspace_len: i64,
    info: *mut i64,
) -> i64;
