//! `conform formats`: the registry, and with `--options` every option of every format.

use super::EXIT_OK;
use conform::formats;

/// `conform formats`.
pub(crate) fn run(options: bool) -> u8 {
    for f in formats::REGISTRY {
        let render = if f.render.is_some() {
            ""
        } else {
            " (no renderer)"
        };
        out!("{:<14} {}{render}", f.id, f.summary);
        if options {
            for o in formats::modes::option_list(f) {
                out!("    {}.{} = {}", f.id, o.name, o.default);
                out!("        {}", o.reason);
            }
        }
    }
    EXIT_OK
}
