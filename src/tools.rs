//! Tool definitions (`tools.json`): the names, parameters and JSON Schemas formats may consult.

use serde_json::Value;

/// One tool a model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The function name.
    pub name: String,
    /// The JSON Schema of the arguments (an empty object schema when absent).
    pub parameters: Value,
}

impl ToolDef {
    /// Names of the schema's top-level properties, in schema order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.parameters
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
    }
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
            defs.push(ToolDef {
                name: name.to_string(),
                parameters,
            });
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
}
