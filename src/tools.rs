//! Tool definitions (`tools.json`): the names, parameters and JSON Schemas formats may consult.

use serde_json::Value;
use std::fmt;
#[cfg(feature = "schema")]
use std::sync::Arc;

/// One tool a model may call.
#[derive(Clone)]
#[non_exhaustive]
pub struct ToolDef {
    /// The function name.
    pub name: String,
    /// The JSON Schema of the arguments (an empty object schema when absent).
    pub parameters: Value,
    /// `parameters` compiled once, when the definition is made: a schema that does not compile
    /// is the definition's fault, never the parser's, so no definition holds one.
    #[cfg(feature = "schema")]
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.name)
            .field("parameters", &self.parameters)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ToolDef {
    /// Equal when name and schema are equal (the validator follows from the schema).
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.parameters == other.parameters
    }
}

impl ToolDef {
    /// A definition whose schema is not compiled (it accepts every value): for tests of code
    /// that must cope with schemas `tools.json` loading would refuse.
    #[cfg(test)]
    pub(crate) fn unchecked(name: &str, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            parameters,
            #[cfg(feature = "schema")]
            validator: Arc::new(
                jsonschema::validator_for(&serde_json::json!({}))
                    .expect("the empty schema compiles"),
            ),
        }
    }

    /// A definition whose schema compiles; the error names the JSON pointer of the fault in
    /// the schema and says what is wrong there.
    #[cfg(feature = "schema")]
    pub fn new(name: impl Into<String>, parameters: Value) -> Result<ToolDef, String> {
        check_size(&parameters)?;
        let validator = jsonschema::validator_for(&parameters).map_err(|e| {
            let at = e.instance_path().as_str();
            let at = if at.is_empty() { "/" } else { at };
            format!("invalid JSON Schema at {at}: {e}")
        })?;
        Ok(ToolDef {
            name: name.into(),
            parameters,
            validator: Arc::new(validator),
        })
    }

    /// A definition; without the `schema` feature the schema is not compiled, so every
    /// `parameters` value is accepted (no format that needs a compiled schema is built then).
    #[cfg(not(feature = "schema"))]
    pub fn new(name: impl Into<String>, parameters: Value) -> Result<ToolDef, String> {
        check_size(&parameters)?;
        Ok(ToolDef {
            name: name.into(),
            parameters,
        })
    }

    /// The compiled schema of the arguments.
    #[cfg(feature = "schema")]
    pub fn validator(&self) -> &Arc<jsonschema::Validator> {
        &self.validator
    }

    /// Names of the schema's top-level properties, in schema order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.parameters
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
    }
}

/// The most values (objects, arrays, strings, numbers… at any depth) one tool's schema may
/// hold: tool schemas are a few hundred, large generated ones a few thousand.
pub const MAX_SCHEMA_VALUES: usize = 100_000;

/// The most `$ref`s one tool's schema may hold: compiling a schema costs up to the square of
/// its chain of references (a chain of 100 000 took 13 s), so a chain stays short.
pub const MAX_SCHEMA_REFS: usize = 1_000;

/// Refuses a schema too large to compile in reasonable time, before it is compiled.
fn check_size(schema: &Value) -> Result<(), String> {
    let (mut values, mut refs) = (0usize, 0usize);
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        values += 1;
        if values > MAX_SCHEMA_VALUES {
            return Err(format!(
                "the schema holds more than {MAX_SCHEMA_VALUES} values; not compiled"
            ));
        }
        match v {
            Value::Object(m) => {
                if m.contains_key("$ref") || m.contains_key("$dynamicRef") {
                    refs += 1;
                    if refs > MAX_SCHEMA_REFS {
                        return Err(format!(
                            "the schema holds more than {MAX_SCHEMA_REFS} $ref; not compiled"
                        ));
                    }
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    Ok(())
}

/// The tool definitions of a corpus directory (possibly none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tools {
    /// The definitions, in file order.
    pub defs: Vec<ToolDef>,
}

impl Tools {
    /// Parses an OpenAI `tools` array (`[{"type":"function","function":{…}}]`) or a bare list of
    /// `{"name", "parameters"}` objects.
    pub fn from_json(text: &str) -> Result<Tools, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        let arr = match &v {
            Value::Array(a) => a,
            Value::Object(o) => o
                .get("tools")
                .and_then(Value::as_array)
                .ok_or("expected an array of tools or an object with a \"tools\" array")?,
            _ => return Err("expected an array of tools".into()),
        };
        let mut defs = Vec::with_capacity(arr.len());
        for (i, item) in arr.iter().enumerate() {
            let f = item.get("function").unwrap_or(item);
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("tool #{i} has no string \"name\""))?;
            let parameters = f
                .get("parameters")
                .or_else(|| f.get("input_schema"))
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
            defs.push(
                ToolDef::new(name, parameters).map_err(|e| format!("tool {name:?} (#{i}): {e}"))?,
            );
        }
        Ok(Tools { defs })
    }

    /// The definition of `name`, if declared.
    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.defs.iter().find(|d| d.name == name)
    }

    /// True when no tools are declared.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_openai_and_bare_forms() {
        let t = Tools::from_json(
            r#"[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},{"name":"ls"}]"#,
        )
        .unwrap();
        assert_eq!(t.defs.len(), 2);
        assert_eq!(
            t.get("read_file")
                .unwrap()
                .param_names()
                .collect::<Vec<_>>(),
            ["path"]
        );
        assert!(t.get("ls").is_some());
        assert!(Tools::from_json("[{}]").is_err());
    }

    #[cfg(feature = "schema")]
    #[test]
    fn a_schema_that_does_not_compile_is_named_with_its_tool_and_pointer() {
        let e = Tools::from_json(
            r#"[{"name":"ok"},{"name":"bad","parameters":{"type":"object","properties":{"p":{"type":"strng"}}}}]"#,
        )
        .unwrap_err();
        assert!(e.contains("\"bad\" (#1)"), "{e}");
        assert!(e.contains("/properties/p/type"), "{e}");
        let e = Tools::from_json(r#"[{"name":"r","parameters":{"minLength":-1}}]"#).unwrap_err();
        assert!(e.contains("/minLength"), "{e}");
    }
}
