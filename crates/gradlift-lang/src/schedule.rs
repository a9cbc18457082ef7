//! Checkpointing schedules for the reverse of a `foldl`.
//!
//! The reverse of `foldl F v A` visits the states `S₀ … Sₙ₋₁` in reverse
//! order (`Sᵢ₊₁ = F(Sᵢ, Aᵢ)`). Keeping all of them costs `n` states; a
//! schedule keeps a few *snapshots* and recomputes the rest by advancing
//! from the nearest one. A schedule is a stream of [`Action`]s over a
//! current state and a set of numbered snapshot slots:
//!
//! - `Advance { from, count }`: apply `F` `count` times, starting at step
//!   `from` (the current state is `S_from` and becomes `S_{from+count}`);
//! - `Store(k)`: copy the current state into slot `k`;
//! - `Restore(k)`: copy slot `k` into the current state;
//! - `Reverse(i)`: the current state is `Sᵢ`: reverse step `i` (the
//!   vector–Jacobian product of `F` at `(Sᵢ, Aᵢ)`).
//!
//! Steps are reversed in the order `n−1, …, 0`, each once.
//!
//! Two families:
//!
//! - [`Schedule::Every`]`(K)`, fixed blocks: the forward pass stores one
//!   snapshot every `K` steps; each block is then restored, replayed while
//!   recording its states, and reversed. Slots: `⌈n/K⌉ + min(K, n) − 1`; steps
//!   advanced: about `2n`.
//! - [`Schedule::Binomial`]`(c)`, Griewank's binomial checkpointing
//!   ("Achieving logarithmic growth of temporal and spatial complexity in
//!   reverse automatic differentiation", 1992; Griewank & Walther, "Revolve",
//!   2000) with `c` slots: with `t` the least number with `β(c, t) ≥ n`,
//!   where `β(c, t) = C(c + t, c)`, it advances `t·n − β(c + 1, t − 1)` steps,
//!   the fewest any schedule with `c` slots can (the tests check it against
//!   the dynamic program over all split points). With `c ≈ log n` the memory
//!   is `O(log n)` states and the time `O(n log n)`.
//!
//! The schedule is a state machine over a caller-provided buffer of
//! [`Schedule::words`] 64-bit words, so native code can drive it through one
//! call per action without the machine allocating.

use std::fmt;

/// How the reverse of a loop recomputes its states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One snapshot every `K` steps (`@checkpoint(K)`); `K ≥ 1`.
    Every(u32),
    /// Binomial checkpointing with `c` snapshot slots
    /// (`@checkpoint(binomial c)`); `c ≥ 1`.
    Binomial(u32),
}

/// The largest `K` or `c` a schedule may name.
pub const MAX_SCHEDULE_PARAM: u32 = 1 << 20;

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Every(k) => write!(f, "{k}"),
            Schedule::Binomial(c) => write!(f, "binomial {c}"),
        }
    }
}

impl Schedule {
    /// Parses the command-line form: `K` or `binomial:C` (also `binomial C`).
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let text = text.trim();
        let number = |s: &str, what: &str| -> Result<u32, String> {
            let k: u64 = s
                .trim()
                .parse()
                .map_err(|_| format!("{what} must be a whole number, found `{}`", s.trim()))?;
            if k == 0 || k > u64::from(MAX_SCHEDULE_PARAM) {
                return Err(format!(
                    "{what} must be between 1 and {MAX_SCHEDULE_PARAM}, found {k}"
                ));
            }
            Ok(k as u32)
        };
        if let Some(rest) = text
            .strip_prefix("binomial:")
            .or_else(|| text.strip_prefix("binomial "))
        {
            return Ok(Schedule::Binomial(number(rest, "the number of snapshots")?));
        }
        if text.starts_with(|c: char| c.is_ascii_digit()) {
            return Ok(Schedule::Every(number(text, "the block length")?));
        }
        Err(format!(
            "a checkpoint schedule is `none`, a block length `K`, or `binomial:C`, found `{text}`"
        ))
    }

    /// The snapshot slots the schedule uses for a loop of `n` steps.
    pub fn slots(self, n: u64) -> u64 {
        match self {
            Schedule::Every(k) => {
                let k = u64::from(k.max(1));
                (n.div_ceil(k) + k.min(n)).saturating_sub(1).max(1)
            }
            Schedule::Binomial(c) => u64::from(c.max(1)).min(n.max(1)),
        }
    }

    /// The words of machine state for a loop of `n` steps.
    pub fn words(self, n: u64) -> u64 {
        match self {
            Schedule::Every(_) => HEADER as u64,
            Schedule::Binomial(_) => HEADER as u64 + FRAME as u64 * self.slots(n),
        }
    }

    /// The steps a loop of `n` steps advances in all (not counting the
    /// recomputation inside each reversed step).
    pub fn advances(self, n: u64) -> u64 {
        let mut buf = vec![0i64; self.words(n) as usize];
        let mut m = Machine::start(self, n, &mut buf);
        let mut total = 0;
        loop {
            match m.next() {
                Action::Done => return total,
                Action::Advance { count, .. } => total += count,
                _ => {}
            }
        }
    }
}

/// One step of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing is left.
    Done,
    /// Apply the step function `count` times from step `from`.
    Advance {
        /// The step the current state is at.
        from: u64,
        /// How many steps to take.
        count: u64,
    },
    /// Copy the current state into a slot.
    Store(u64),
    /// Copy a slot into the current state.
    Restore(u64),
    /// Reverse step `i`; the current state is `Sᵢ`.
    Reverse(u64),
}

impl Action {
    /// The action as three words (kind, first operand, second operand),
    /// the form native code reads: kinds 0 done, 1 advance, 2 store,
    /// 3 restore, 4 reverse.
    pub fn encode(self) -> [i64; 3] {
        match self {
            Action::Done => [0, 0, 0],
            Action::Advance { from, count } => [1, from as i64, count as i64],
            Action::Store(k) => [2, k as i64, 0],
            Action::Restore(k) => [3, k as i64, 0],
            Action::Reverse(i) => [4, i as i64, 0],
        }
    }
}

// Header words.
const KIND: usize = 0;
const N: usize = 1;
const PARAM: usize = 2;
const PHASE: usize = 3;
const B: usize = 4;
const J: usize = 5;
const SP: usize = 6;
const HEADER: usize = 8;
// Binomial frame words: slot, first step, steps, free slots, k or m, phase.
const FRAME: usize = 6;

// Phases of the fixed-block machine.
const FWD_STORE: i64 = 0;
const FWD_ADVANCE: i64 = 1;
const BLOCK: i64 = 2;
const RECORD: i64 = 3;
const RECORD_ADVANCE: i64 = 4;
const LAST: i64 = 5;
const INNER: i64 = 6;
const INNER_STEP: i64 = 7;
const DONE: i64 = 8;

// Phases of a binomial frame (and the machine's start phase).
const START: i64 = 0;
const ONE: i64 = 1;
const SINGLE_RESTORE: i64 = 2;
const SINGLE_ADVANCE: i64 = 3;
const SINGLE_REVERSE: i64 = 4;
const SPLIT_ADVANCE: i64 = 5;
const SPLIT_STORE: i64 = 6;
const SPLIT_SECOND: i64 = 7;
const SPLIT_FIRST: i64 = 8;
const INITIAL_STORE: i64 = 9;

/// A schedule running over a word buffer.
pub struct Machine<'a> {
    buf: &'a mut [i64],
}

impl<'a> Machine<'a> {
    /// Starts the schedule for a loop of `n` steps in `buf`, which holds at
    /// least [`Schedule::words`]`(n)` words.
    pub fn start(schedule: Schedule, n: u64, buf: &'a mut [i64]) -> Machine<'a> {
        assert!(
            buf.len() as u64 >= schedule.words(n),
            "schedule buffer too small"
        );
        buf[..HEADER].fill(0);
        buf[N] = n as i64;
        match schedule {
            Schedule::Every(k) => {
                buf[KIND] = 0;
                buf[PARAM] = i64::from(k.max(1));
                buf[PHASE] = if n == 0 { DONE } else { FWD_STORE };
            }
            Schedule::Binomial(_) => {
                buf[KIND] = 1;
                buf[PARAM] = schedule.slots(n) as i64;
                buf[PHASE] = if n == 0 { DONE } else { INITIAL_STORE };
            }
        }
        Machine { buf }
    }

    /// Resumes a machine whose state is in `buf`. A buffer that holds no
    /// started machine gives [`Action::Done`].
    pub fn resume(buf: &'a mut [i64]) -> Machine<'a> {
        Machine { buf }
    }

    /// The next action.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Action {
        if self.buf.len() < HEADER || self.buf[PARAM] < 1 || self.buf[N] < 0 {
            return Action::Done;
        }
        if self.buf[KIND] == 0 {
            self.next_fixed()
        } else {
            self.next_binomial()
        }
    }

    fn next_fixed(&mut self) -> Action {
        let b = &mut *self.buf;
        let n = b[N] as u64;
        let k = b[PARAM] as u64;
        let blocks = n.div_ceil(k);
        loop {
            let (blk, j) = (b[B] as u64, b[J] as u64);
            let len = k.min(n.saturating_sub(blk * k));
            match b[PHASE] {
                FWD_STORE => {
                    if blk == blocks {
                        b[B] = blocks as i64 - 1;
                        b[PHASE] = BLOCK;
                        continue;
                    }
                    b[PHASE] = FWD_ADVANCE;
                    return Action::Store(blk);
                }
                FWD_ADVANCE => {
                    b[B] += 1;
                    b[PHASE] = FWD_STORE;
                    if blk + 1 < blocks {
                        return Action::Advance {
                            from: blk * k,
                            count: k,
                        };
                    }
                }
                BLOCK => {
                    b[J] = 0;
                    b[PHASE] = RECORD;
                    return Action::Restore(blk);
                }
                RECORD => {
                    if j + 1 < len {
                        b[PHASE] = RECORD_ADVANCE;
                        return Action::Store(blocks + j);
                    }
                    b[PHASE] = LAST;
                }
                RECORD_ADVANCE => {
                    b[J] += 1;
                    b[PHASE] = RECORD;
                    return Action::Advance {
                        from: blk * k + j,
                        count: 1,
                    };
                }
                LAST => {
                    b[J] = len as i64 - 1;
                    b[PHASE] = INNER;
                    return Action::Reverse(blk * k + len - 1);
                }
                INNER => {
                    if j == 0 {
                        if blk == 0 {
                            b[PHASE] = DONE;
                            return Action::Done;
                        }
                        b[B] -= 1;
                        b[PHASE] = BLOCK;
                        continue;
                    }
                    b[J] -= 1;
                    b[PHASE] = INNER_STEP;
                    return Action::Restore(blocks + j - 1);
                }
                INNER_STEP => {
                    b[PHASE] = INNER;
                    return Action::Reverse(blk * k + j);
                }
                _ => return Action::Done,
            }
        }
    }

    fn frame(&mut self, depth: usize) -> &mut [i64] {
        let at = HEADER + FRAME * depth;
        &mut self.buf[at..at + FRAME]
    }

    fn next_binomial(&mut self) -> Action {
        match self.buf[PHASE] {
            INITIAL_STORE => {
                self.buf[PHASE] = START;
                self.buf[SP] = 1;
                let (n, c) = (self.buf[N], self.buf[PARAM]);
                self.frame(0).copy_from_slice(&[0, 0, n, c, 0, START]);
                return Action::Store(0);
            }
            DONE => return Action::Done,
            _ => {}
        }
        loop {
            let sp = self.buf[SP] as usize;
            if HEADER + FRAME * sp > self.buf.len() {
                // Only a buffer smaller than `Schedule::words` gets here.
                return Action::Done;
            }
            if sp == 0 {
                self.buf[PHASE] = DONE;
                return Action::Done;
            }
            let f = self.frame(sp - 1);
            let (slot, l, n, s, k) = (
                f[0] as u64,
                f[1] as u64,
                f[2] as u64,
                f[3] as u64,
                f[4] as u64,
            );
            match f[5] {
                START => {
                    if n == 0 {
                        self.buf[SP] -= 1;
                    } else if n == 1 {
                        f[5] = ONE;
                        return Action::Restore(slot);
                    } else if s == 1 {
                        f[4] = n as i64 - 1;
                        f[5] = SINGLE_RESTORE;
                    } else {
                        f[4] = split(n, s) as i64;
                        f[5] = SPLIT_ADVANCE;
                        return Action::Restore(slot);
                    }
                }
                ONE => {
                    self.buf[SP] -= 1;
                    return Action::Reverse(l);
                }
                SINGLE_RESTORE => {
                    f[5] = SINGLE_ADVANCE;
                    return Action::Restore(slot);
                }
                SINGLE_ADVANCE => {
                    f[5] = SINGLE_REVERSE;
                    if k > 0 {
                        return Action::Advance { from: l, count: k };
                    }
                }
                SINGLE_REVERSE => {
                    if k == 0 {
                        self.buf[SP] -= 1;
                    } else {
                        f[4] -= 1;
                        f[5] = SINGLE_RESTORE;
                    }
                    return Action::Reverse(l + k);
                }
                SPLIT_ADVANCE => {
                    f[5] = SPLIT_STORE;
                    return Action::Advance { from: l, count: k };
                }
                SPLIT_STORE => {
                    f[5] = SPLIT_SECOND;
                    return Action::Store(slot + 1);
                }
                SPLIT_SECOND => {
                    if HEADER + FRAME * (sp + 1) > self.buf.len() {
                        return Action::Done;
                    }
                    let f = self.frame(sp - 1);
                    f[5] = SPLIT_FIRST;
                    self.buf[SP] += 1;
                    let next = [
                        slot as i64 + 1,
                        (l + k) as i64,
                        (n - k) as i64,
                        s as i64 - 1,
                        0,
                        START,
                    ];
                    self.frame(sp).copy_from_slice(&next);
                }
                SPLIT_FIRST => {
                    f[2] = k as i64;
                    f[4] = 0;
                    f[5] = START;
                }
                _ => return Action::Done,
            }
        }
    }
}

/// `β(s, t) = C(s + t, s)`, the most steps `s` slots reverse when no step
/// is advanced more than `t` times; 0 for `t < 0`; saturating.
fn beta(s: u64, t: i64) -> u64 {
    if t < 0 {
        return 0;
    }
    // C(s + t, min(s, t)) by the product formula, exact at each step.
    let t = t as u64;
    let (k, total) = (s.min(t), s + t);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * u128::from(total - i) / u128::from(i + 1);
        if c > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    c as u64
}

/// Where the binomial schedule places the next snapshot when reversing
/// `n ≥ 2` steps with `s ≥ 2` slots: `m` steps after the current one,
/// within the range where both parts stay binomially optimal.
fn split(n: u64, s: u64) -> u64 {
    let mut t = 0i64;
    while beta(s, t) < n {
        t += 1;
    }
    let lo = n.saturating_sub(beta(s - 1, t)).max(1);
    let hi = (n - 1).min(beta(s, t - 1));
    beta(s, t - 2).clamp(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a schedule on symbolic states (a state is its step number) and
    /// checks every action; returns the steps advanced and the slots used.
    fn simulate(schedule: Schedule, n: u64) -> (u64, u64) {
        let mut buf = vec![-7i64; schedule.words(n) as usize];
        let mut m = Machine::start(schedule, n, &mut buf);
        let slots = schedule.slots(n);
        let mut store: Vec<Option<u64>> = vec![None; slots as usize];
        let (mut state, mut next_reverse, mut advanced, mut used) = (Some(0u64), n, 0, 0);
        loop {
            match m.next() {
                Action::Done => break,
                Action::Advance { from, count } => {
                    assert_eq!(state, Some(from), "{schedule:?} n={n}");
                    assert!(count >= 1 && from + count < n);
                    state = Some(from + count);
                    advanced += count;
                }
                Action::Store(k) => {
                    assert!(k < slots, "{schedule:?} n={n}: slot {k} of {slots}");
                    store[k as usize] = state;
                    used = used.max(k + 1);
                }
                Action::Restore(k) => {
                    state = store[k as usize];
                    assert!(state.is_some(), "restoring an empty slot");
                }
                Action::Reverse(i) => {
                    assert_eq!(state, Some(i), "{schedule:?} n={n}");
                    assert_eq!(i + 1, next_reverse, "{schedule:?} n={n}: out of order");
                    next_reverse = i;
                    state = None;
                }
            }
        }
        assert_eq!(
            next_reverse, 0,
            "{schedule:?} n={n}: not every step reversed"
        );
        (advanced, used)
    }

    /// The fewest steps any schedule with `s` slots advances to reverse `n`
    /// steps, over every split point.
    fn optimum(max_n: usize, max_s: usize) -> Vec<Vec<u64>> {
        let mut f = vec![vec![0u64; max_n + 1]; max_s + 1];
        for s in 1..=max_s {
            for n in 2..=max_n {
                f[s][n] = if s == 1 {
                    (n * (n - 1) / 2) as u64
                } else {
                    (1..n)
                        .map(|m| m as u64 + f[s - 1][n - m] + f[s][m])
                        .min()
                        .unwrap()
                };
            }
        }
        f
    }

    #[test]
    fn binomial_is_optimal() {
        let f = optimum(120, 7);
        for s in 1..=7u32 {
            for n in 0..=120u64 {
                let (advanced, used) = simulate(Schedule::Binomial(s), n);
                assert_eq!(advanced, f[s as usize][n as usize], "s={s} n={n}");
                assert!(used <= u64::from(s));
                assert_eq!(advanced, Schedule::Binomial(s).advances(n));
            }
        }
    }

    #[test]
    fn binomial_matches_the_closed_form() {
        for (c, n) in [
            (10u64, 2_000_000u64),
            (20, 2_000_000),
            (40, 100_000),
            (3, 1000),
        ] {
            let mut t = 0;
            while beta(c, t) < n {
                t += 1;
            }
            let closed = t as u64 * n - beta(c + 1, t - 1);
            assert_eq!(
                Schedule::Binomial(c as u32).advances(n),
                closed,
                "c={c} n={n}"
            );
        }
    }

    #[test]
    fn fixed_blocks_are_valid() {
        for k in [1u32, 2, 3, 4, 7, 16] {
            for n in 0..60u64 {
                let (advanced, used) = simulate(Schedule::Every(k), n);
                assert!(used <= Schedule::Every(k).slots(n));
                // The forward pass to the last block, then each block's replay.
                let k = u64::from(k);
                let last = n.saturating_sub(1) / k * k;
                assert_eq!(advanced, last + n - n.div_ceil(k), "k={k} n={n}");
            }
        }
    }

    #[test]
    fn parse_schedules() {
        assert_eq!(Schedule::parse("64"), Ok(Schedule::Every(64)));
        assert_eq!(Schedule::parse("binomial:20"), Ok(Schedule::Binomial(20)));
        assert!(Schedule::parse("0").is_err());
        assert!(Schedule::parse("binomial:").is_err());
        assert!(Schedule::parse("fast").is_err());
        assert!(Schedule::parse("99999999999").is_err());
    }
}
