//! Declared parameters, the machinery the CLI and script sources share: a parameter's
//! [`Kind`] (its phrase, the values that fit, its schema, the argv items a value becomes),
//! the tool's input schema, and the checks a call's arguments meet before any reach argv:
//! no unknown argument, every required one given, each of its type and among its `enum`,
//! no NUL, and no item that starts with `-` (an option) or, for a program, `@` (a response
//! file of options) where the source does not allow one. Where the items go (flags,
//! positionals, `--name value` pairs, standard input) is each source's own.

use serde_json::{Map, Value, json};

use super::SourceError;

/// What a declared parameter takes: the CLI's `type` and the script header's types in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A JSON string.
    String,
    /// Any JSON number.
    Number,
    /// A JSON number without a fraction.
    Integer,
    /// `true` (the flag) or `false` (nothing).
    Boolean,
    /// An array of strings, numbers or booleans, an item an argv item.
    Array,
    /// Any JSON value, passed as its JSON text.
    Json,
}

impl Kind {
    /// The kind as a message names it.
    pub(crate) fn phrase(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Number => "a number",
            Self::Integer => "an integer",
            Self::Boolean => "true or false",
            Self::Array => "an array of strings, numbers or booleans",
            Self::Json => "any JSON value",
        }
    }

    pub(crate) fn fits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Number => value.is_number(),
            Self::Integer => value.is_i64() || value.is_u64(),
            Self::Boolean => value.is_boolean(),
            Self::Array => value
                .as_array()
                .is_some_and(|items| items.iter().all(is_scalar)),
            Self::Json => true,
        }
    }

    fn schema(self) -> Value {
        match self {
            Self::String => json!({ "type": "string" }),
            Self::Number => json!({ "type": "number" }),
            Self::Integer => json!({ "type": "integer" }),
            Self::Boolean => json!({ "type": "boolean" }),
            Self::Array => json!({
                "type": "array",
                "items": { "type": ["string", "number", "boolean"] },
            }),
            Self::Json => json!({}),
        }
    }

    /// The argv items `value` becomes: a `json` value its JSON text, an array's items one
    /// each, a boolean none (its flag's presence is the source's to write).
    pub(crate) fn items(self, value: &Value) -> Vec<String> {
        match (self, value) {
            (Self::Json, value) => vec![value.to_string()],
            (_, Value::Array(items)) => items.iter().map(argv_text).collect(),
            (_, Value::Bool(_)) => Vec::new(),
            (_, other) => vec![argv_text(other)],
        }
    }

    /// The first argv item of `value` that starts with `-`, with its position (from 1) when
    /// `value` is passed as several items.
    pub(crate) fn dash_item(self, value: &Value) -> Option<(Option<usize>, String)> {
        self.option_item(value, Leading::Dash)
    }

    /// The first argv item of `value` that a program could read as options `leading`
    /// names, with its position (from 1) when `value` is passed as several items.
    pub(crate) fn option_item(
        self,
        value: &Value,
        leading: Leading,
    ) -> Option<(Option<usize>, String)> {
        let several = self != Self::Json && value.is_array();
        self.items(value)
            .into_iter()
            .enumerate()
            .find(|(_, item)| leading.reads_as_options(item))
            .map(|(i, item)| (several.then_some(i + 1), item))
    }
}

/// The leading characters that make an argv item options of the caller's choosing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leading {
    /// `-`: an option.
    Dash,
    /// `@`: a response file, whose contents gcc, clang, javac, the JVM's launcher and every
    /// program built on libiberty's `expandargv` or picocli read as options, even after
    /// `--` (so `@notes.txt` can carry `-wrapper` to gcc).
    At,
    /// Either.
    DashOrAt,
}

impl Leading {
    fn reads_as_options(self, item: &str) -> bool {
        match self {
            Self::Dash => item.starts_with('-'),
            Self::At => item.starts_with('@'),
            Self::DashOrAt => item.starts_with(['-', '@']),
        }
    }
}

fn is_scalar(value: &Value) -> bool {
    value.is_string() || value.is_number() || value.is_boolean()
}

/// A parameter as a source declares it, read the same way by every source.
pub(crate) trait Declared {
    fn name(&self) -> &str;
    fn kind(&self) -> Kind;
    fn description(&self) -> Option<&str>;
    /// The call must give it.
    fn required(&self) -> bool;
    /// Passed when the call does not give it.
    fn default(&self) -> Option<&Value>;
    /// The only values it may take.
    fn allowed(&self) -> Option<&[Value]> {
        None
    }
}

/// How a source words a refusal of the model's arguments.
pub(crate) struct Wording {
    /// What takes the arguments: "this tool", "this script".
    pub takes: &'static str,
    /// What a leading `-` would make of a value: "would be read as an option".
    pub as_option: &'static str,
}

/// The JSON Schema of a tool's input: exactly the declared parameters.
pub(crate) fn input_schema<P: Declared>(params: &[P]) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in params {
        let mut property = param.kind().schema();
        if let Some(description) = param.description() {
            property["description"] = json!(description);
        }
        if let Some(allowed) = param.allowed() {
            property["enum"] = json!(allowed);
        }
        if let Some(default) = param.default() {
            property["default"] = default.clone();
        }
        if param.required() {
            required.push(json!(param.name()));
        }
        properties.insert(param.name().to_owned(), property);
    }
    super::closed_object(properties, required)
}

/// Refuses an argument no parameter declares, naming the ones that are.
pub(crate) fn known<P: Declared>(
    params: &[P],
    arguments: &Map<String, Value>,
    wording: &Wording,
) -> Result<(), SourceError> {
    let Some(unknown) = arguments
        .keys()
        .find(|key| !params.iter().any(|param| param.name() == key.as_str()))
    else {
        return Ok(());
    };
    let names: Vec<&str> = params.iter().map(Declared::name).collect();
    let takes = if names.is_empty() {
        format!("{} takes no arguments", wording.takes)
    } else {
        format!("{} takes {}", wording.takes, names.join(", "))
    };
    Err(invalid(format!("unknown argument \"{unknown}\": {takes}")))
}

/// The value `param` is passed with, given or its default, once it is of its kind and among
/// its `enum`; `None` when an optional one is absent.
pub(crate) fn value<'v, P: Declared>(
    param: &'v P,
    arguments: &'v Map<String, Value>,
) -> Result<Option<&'v Value>, SourceError> {
    let given = arguments.get(param.name()).filter(|value| !value.is_null());
    let Some(value) = given.or(param.default()) else {
        if param.required() {
            return Err(invalid(format!(
                "missing required argument \"{}\": pass it as {}",
                param.name(),
                param.kind().phrase()
            )));
        }
        return Ok(None);
    };
    if !param.kind().fits(value) {
        return Err(invalid(format!(
            "argument \"{}\" must be {}, not {}",
            param.name(),
            param.kind().phrase(),
            describe_value(value)
        )));
    }
    if let Some(allowed) = param.allowed()
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(invalid(format!(
            "argument \"{}\" must be one of {}, not {value}",
            param.name(),
            listed.join(", ")
        )));
    }
    Ok(Some(value))
}

/// The argv items `value` becomes, none holding a NUL, which no argument can carry.
pub(crate) fn items<P: Declared>(param: &P, value: &Value) -> Result<Vec<String>, SourceError> {
    let items = param.kind().items(value);
    if items.iter().any(|item| item.contains('\0')) {
        return Err(invalid(format!(
            "argument \"{}\" holds a NUL character, which no argument can carry: remove it",
            param.name()
        )));
    }
    Ok(items)
}

/// Refuses `value` when an item of it starts with `-`: the program would take it for an
/// option of the model's choosing, whether alone or after a flag.
pub(crate) fn no_dash<P: Declared>(
    param: &P,
    value: &Value,
    wording: &Wording,
) -> Result<(), SourceError> {
    no_options(param, value, Leading::Dash, wording)
}

/// Refuses `value` when an item of it starts with what `leading` names: `-`, which the
/// program would take for an option of the model's choosing, whether alone or after a flag;
/// `@`, which a program that reads response files takes for a file of options.
pub(crate) fn no_options<P: Declared>(
    param: &P,
    value: &Value,
    leading: Leading,
    wording: &Wording,
) -> Result<(), SourceError> {
    let Some((position, item)) = param.kind().option_item(value, leading) else {
        return Ok(());
    };
    let which = match position {
        Some(position) => format!("argument \"{}\" item {position}", param.name()),
        None => format!("argument \"{}\"", param.name()),
    };
    let (first, read) = if item.starts_with('@') {
        (
            '@',
            "a program that reads response files would read the file it names as options",
        )
    } else {
        ('-', wording.as_option)
    };
    Err(invalid(format!(
        "{which} is \"{}\", which starts with '{first}' and {read}: pass a value that does \
         not start with '{first}'",
        shorten(&item),
    )))
}

fn invalid(message: String) -> SourceError {
    SourceError::InvalidArguments(message)
}

/// A caller's value as an error quotes it: its first 64 characters.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((cut, _)) => format!("{}\u{2026}", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A value as one argv item: a string as written, anything else as its JSON text.
pub(crate) fn argv_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// What a wrong value was, for an error message (its kind, not its possibly long text).
pub(crate) fn describe_value(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_f64() => "a number with a fraction",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array (of something else)",
        Value::Object(_) => "an object",
    }
}
