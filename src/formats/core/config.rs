//! The `bool` options of a format's `Config` as a table: `config!` declares the `Config`
//! and makes `Config::OPTIONS`, one [`Opt`] (name, reason = the doc comment, getter, setter)
//! per option. `options.rs` turns these tables into a format's settable options.

/// One `bool` option of a configuration type `C`: a leniency (a recovered deviation, reported
/// with a warning of the same name) or a switch such as `reasoning.enabled`.
pub struct Opt<C> {
    /// The option's name, as in `--option FORMAT.NAME=…` (the field's name).
    pub name: &'static str,
    /// Why the option exists and what it does: the field's doc comment.
    pub reason: &'static str,
    /// Reads the option from a configuration.
    pub get: fn(&C) -> bool,
    /// Sets the option in a configuration.
    pub set: fn(&mut C, bool),
}

/// A configuration declared with `config!`: its `bool` options as a table, for code generic
/// over the configuration (`entry.rs`).
pub trait Settable: Sized + 'static {
    /// Every `bool` option of the configuration.
    const OPTIONS: &'static [Opt<Self>];
}

/// Declares a format's `Config` with its `bool` options in a `options { … }` block (each with
/// its doc comment, the option's reason) before the other fields, and makes `Config::OPTIONS`,
/// the table of those options (also as [`Settable::OPTIONS`]).
macro_rules! config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            options {
                $( $(#[doc = $doc:literal])+ $opt:ident, )*
            }
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[doc = $doc])+ pub $opt: bool, )*
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Every `bool` option of this configuration, with its doc comment as its reason.
            pub const OPTIONS: &'static [$crate::formats::config::Opt<$name>] = &[
                $( $crate::formats::config::Opt {
                    name: stringify!($opt),
                    reason: concat!($($doc, "\n"),+),
                    get: |c| c.$opt,
                    set: |c, on| c.$opt = on,
                }, )*
            ];
        }

        impl $crate::formats::config::Settable for $name {
            const OPTIONS: &'static [$crate::formats::config::Opt<$name>] = $name::OPTIONS;
        }
    };
}
pub(crate) use config;

#[cfg(test)]
mod tests {
    config! {
        /// A configuration made by the macro, for its own tests.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct Demo {
            options {
                /// The first option, with a reason written
                /// over two lines.
                first,
                /// The second option.
                second,
            }
            /// Not an option: not a `bool`.
            pub limit: usize,
        }
    }

    #[test]
    fn the_macro_lists_every_bool_with_its_doc_and_a_setter_changes_only_its_option() {
        let names: Vec<&str> = Demo::OPTIONS.iter().map(|o| o.name).collect();
        assert_eq!(names, ["first", "second"]);
        assert_eq!(
            Demo::OPTIONS[0].reason,
            " The first option, with a reason written\n over two lines.\n"
        );
        for o in Demo::OPTIONS {
            let mut c = Demo::default();
            (o.set)(&mut c, true);
            assert!((o.get)(&c), "{}", o.name);
            for other in Demo::OPTIONS.iter().filter(|x| x.name != o.name) {
                assert!(!(other.get)(&c), "{} moved {}", o.name, other.name);
            }
            assert_eq!(c.limit, 0);
        }
    }
}
