//! Partial evaluation and the simplifications of Figure 12 (FIXME(#3): not yet built).
