//! Tool calls written as XML inside prose: the Roo/Cline protocol, AccessLint's strict XML
//! and Forge's two formats, over the streaming XML tokenizer (`lexers::xml`) and the glue they
//! share (`prose.rs`: the driver, held input, the registry entry of a format of the family).

pub mod forge_json;
pub mod forge_xml;
pub(crate) mod prose;
pub mod roo_xml;
#[cfg(feature = "schema")]
pub mod strict_xml;
