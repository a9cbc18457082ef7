//! `while F v`: the loop that stops on a condition.
//!
//! The state is carried as a fold's accumulator is (in variables, its
//! arrays in two buffers of their own), so the workspace holds one state
//! and one step's temporaries, released at the end of every step. A step
//! lowers `F` on the state: when its flag is 0 the loop ends with the state
//! as it is; otherwise the next state is copied out of the step's
//! temporaries and the loop goes on. The steps are counted, and a loop
//! still going after the iteration limit (`Jit::max_iterations`, compiled
//! in as a constant) fails with [`Status::IterationLimit`].

use super::*;

impl Translator<'_, '_> {
    /// `while F v`.
    pub(crate) fn while_loop(&mut self, f: &Expr, init: &Expr) -> Result<Values, JitError> {
        let (params, body) = self.lambda(f, 1)?;
        let s_ty = self.type_of(init)?;
        let v = self.lower(init)?;
        let state = self.carried(&v, &s_ty)?;
        let count = self.b.declare_var(types::I64);
        let zero = self.iconst(0);
        self.b.def_var(count, zero);
        let limit = i64::try_from(self.max_iterations).unwrap_or(i64::MAX);
        let (header, exit) = (self.b.create_block(), self.b.create_block());
        let branch = self.b.ins().jump(header, &[]);
        self.loops.push(crate::lower::LoopEntry {
            first: header,
            branch,
            copies: Default::default(),
        });
        self.b.switch_to_block(header);
        let tys = [s_ty];
        let r = self.repeated("a `while` loop's step", |t| -> Result<(), JitError> {
            let mark = t.mark();
            let current = t.get(&state);
            let out = t.apply(params, body, vec![current], &tys)?;
            let Values::Tuple(parts) = out else {
                return Err(JitError::Internal(
                    "a `while` loop's step returns a pair".into(),
                ));
            };
            let [Values::Int(go), next] = &parts[..] else {
                return Err(JitError::Internal(
                    "a `while` loop's step returns a flag and a state".into(),
                ));
            };
            let (more, done) = (t.b.create_block(), t.b.create_block());
            t.b.ins().brif(*go, more, &[], done, &[]);
            t.b.switch_to_block(more);
            t.region(|t| -> Result<(), JitError> {
                let n = t.b.use_var(count);
                let n = t.b.ins().iadd_imm_s(n, 1);
                t.b.def_var(count, n);
                let within = t.b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, n, limit);
                t.check(within, Status::IterationLimit, n);
                t.set(&state, next)?;
                t.release(mark);
                t.b.ins().jump(header, &[]);
                Ok(())
            })?;
            t.b.switch_to_block(done);
            t.release(mark);
            Ok(())
        });
        self.loops.pop();
        r?;
        self.b.ins().jump(exit, &[]);
        self.b.switch_to_block(exit);
        Ok(self.get(&state))
    }
}
