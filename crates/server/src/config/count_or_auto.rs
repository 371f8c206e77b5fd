//! The value of `--threads` and `--front-threads`: a count, or `auto`. Its own module, as both
//! the command line ([`super::args`]) and the parser of its text ([`super::parse`]) name it.

/// `--threads` and `--front-threads`: a number, or `auto` for the rule the flag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOrAuto {
    Auto,
    Count(usize),
}
