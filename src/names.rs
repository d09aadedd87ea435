//! Enums named on the wire: one list of `Variant => "name"` gives an enum its variants in
//! order, its names and its `Display`, so that each name is written once.

/// Gives a fieldless enum, from one list of `Variant => "name"` in declaration order: `ALL`
/// (every variant, in that order), `as_str` (the name used in specs, reports and on the command
/// line) and `Display` (that name). A variant missing from the list fails to compile.
macro_rules! wire_names {
    ($ty:ident { $($variant:ident => $name:literal,)+ }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];

            /// The snake_case name used in specs, reports and on the command line.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use wire_names;
