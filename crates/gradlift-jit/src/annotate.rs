//! Source terms as comments in the printed Cranelift IR.
//!
//! When the lowering is asked for labels, every term that starts a group
//! of instructions — a parameter's load, a `let` binding, an array
//! operation (its loop), an `if`, the store of the result, the failure
//! block — gets a label, the term printed on one line and truncated to
//! [`WIDTH`] characters. Its id becomes the Cranelift source location of
//! the instructions built while it is lowered (nested terms take their own
//! and the outer label resumes after them). [`CommentWriter`] prints the
//! label as a `;` comment above the first instruction of each run of
//! instructions with the same location.

use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Block, Function, Inst, SourceLoc, Value};
use cranelift_codegen::write::{decorate_function, FuncWriter, PlainWriter};
use std::fmt::{self, Write};

/// The longest label, in characters.
pub(crate) const WIDTH: usize = 100;

/// `x` printed on one line (runs of white space become one space),
/// truncated to [`WIDTH`] characters with `…`. Printing stops once the
/// label is long enough, so a label costs O([`WIDTH`]) whatever the size of
/// the term.
pub(crate) fn one_line(x: &dyn fmt::Display) -> String {
    struct Bounded {
        text: String,
        chars: usize,
        space: bool,
    }
    impl Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for c in s.chars() {
                if c.is_whitespace() {
                    self.space = !self.text.is_empty();
                    continue;
                }
                if self.space {
                    self.space = false;
                    self.push(' ')?;
                }
                self.push(c)?;
            }
            Ok(())
        }
    }
    impl Bounded {
        fn push(&mut self, c: char) -> fmt::Result {
            if self.chars == WIDTH {
                return Err(fmt::Error);
            }
            self.text.push(c);
            self.chars += 1;
            Ok(())
        }
    }
    let mut b = Bounded {
        text: String::new(),
        chars: 0,
        space: false,
    };
    if write!(b, "{x}").is_err() {
        b.text.pop();
        b.text.push('…');
    }
    b.text
}

/// Labels by source location id.
#[derive(Default, Debug)]
pub(crate) struct Labels(pub Vec<String>);

impl Labels {
    /// Registers a label; its source location.
    pub fn add(&mut self, text: String) -> SourceLoc {
        self.0.push(text);
        SourceLoc::new((self.0.len() - 1) as u32)
    }
}

/// Prints a function with the labels as comments.
pub(crate) fn write_annotated(func: &Function, labels: &Labels) -> String {
    let mut locs = SecondaryMap::new();
    for block in func.layout.blocks() {
        for inst in func.layout.block_insts(block) {
            locs[inst] = func.srcloc(inst);
        }
    }
    // The locations live in `locs`; without them the plain printer keeps
    // its narrow indentation.
    let mut plain = func.clone();
    plain.stencil.srclocs.clear();
    let mut text = String::new();
    let mut w = CommentWriter {
        labels,
        locs,
        last: SourceLoc::default(),
    };
    decorate_function(&mut w, &mut text, &plain).expect("writing to a String");
    text
}

/// A [`FuncWriter`] that prints a label above the first instruction of
/// each run of instructions (in layout order) from the same term.
struct CommentWriter<'a> {
    labels: &'a Labels,
    locs: SecondaryMap<Inst, SourceLoc>,
    last: SourceLoc,
}

impl FuncWriter for CommentWriter<'_> {
    fn write_block_header(
        &mut self,
        w: &mut dyn Write,
        func: &Function,
        block: Block,
        indent: usize,
    ) -> fmt::Result {
        PlainWriter.write_block_header(w, func, block, indent)
    }

    fn write_instruction(
        &mut self,
        w: &mut dyn Write,
        func: &Function,
        aliases: &SecondaryMap<Value, Vec<Value>>,
        inst: Inst,
        indent: usize,
    ) -> fmt::Result {
        let loc = self.locs[inst];
        if !loc.is_default() && self.last != loc {
            if let Some(label) = self.labels.0.get(loc.bits() as usize) {
                writeln!(w, "{:indent$}; {label}", "")?;
            }
            self.last = loc;
        }
        PlainWriter.write_instruction(w, func, aliases, inst, indent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_and_truncates() {
        assert_eq!(one_line(&"let x =\n    a  + b"), "let x = a + b");
        let long = "x".repeat(3 * WIDTH);
        let t = one_line(&long);
        assert_eq!(t.chars().count(), WIDTH);
        assert!(t.ends_with('…'));
        let exact = "y".repeat(WIDTH);
        assert_eq!(one_line(&exact), exact);
    }
}
