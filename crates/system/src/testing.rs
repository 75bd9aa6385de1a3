//! Helpers of the unit tests.

use std::fmt::Debug;

/// Assert that `f` answers each `(input, expected)` pair of `cases`.
pub fn assert_maps<R>(f: impl Fn(&'static str) -> R, cases: &[(&'static str, &'static str)])
where
    R: PartialEq<&'static str> + Debug,
{
    for (input, expected) in cases {
        assert_eq!(f(input), *expected, "input {input:?}");
    }
}
