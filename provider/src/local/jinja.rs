//! The Jinja environment chat templates are rendered in: minijinja, set up
//! to behave as Hugging Face's `apply_chat_template` does
//! (`transformers.utils.chat_template_utils`, which uses Jinja2's
//! `ImmutableSandboxedEnvironment`).
//!
//! - `trim_blocks` and `lstrip_blocks` are on: a newline after a block tag
//!   is dropped, and so are spaces before one at the start of a line.
//! - `{% break %}` and `{% continue %}` work (Jinja2's `loopcontrols`).
//! - Python's string and dict methods that templates call (`.strip()`,
//!   `.startswith()`, `.split()`, `.items()`, `.get()`, …) come from
//!   `minijinja_contrib::pycompat`.
//! - `tojson` is Python's `json.dumps(x, ensure_ascii=False)` as
//!   Transformers defines it: `", "` and `": "` between items, non-ASCII
//!   characters as they are, `<`, `>`, `&` and `'` not escaped (minijinja's
//!   own `tojson` escapes them for HTML), keys in their order, and the
//!   `indent`, `separators`, `sort_keys` and `ensure_ascii` arguments.
//! - `raise_exception(message)` fails the rendering with the message.
//! - `strftime_now(format)` formats the current time (UTC here; Python's
//!   is the local time) with the usual `%` directives.
//!
//! [`json_to_value`] turns JSON (tool schemas, call arguments) into
//! template values, keeping the order of object keys.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

/// A fresh environment with Hugging Face's settings and helpers.
pub(crate) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("the default delimiters are valid"),
    );
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env
}

/// Prefixes the message of an error raised by the template itself.
pub(crate) const RAISED: &str = "the template raised an exception: ";

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("{RAISED}{message}"),
    ))
}

/// JSON (from `serde_json`) as a template value; `string` maps every
/// string, keys included (the template module uses it to keep special
/// tokens' texts in messages from becoming special tokens).
pub(crate) fn json_to_value(json: &serde_json::Value, string: &dyn Fn(&str) -> String) -> Value {
    match json {
        serde_json::Value::Null => Value::from(()),
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::from(string(s)),
        serde_json::Value::Array(items) => Value::from(
            items
                .iter()
                .map(|item| json_to_value(item, string))
                .collect::<Vec<_>>(),
        ),
        serde_json::Value::Object(map) => Value::from_pairs(
            map.iter()
                .map(|(key, value)| (string(key), json_to_value(value, string))),
        ),
    }
}

// --- tojson -------------------------------------------------------------

/// How [`tojson`] lays JSON out.
struct JsonStyle {
    indent: Option<String>,
    item_separator: String,
    key_separator: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

/// `tojson` as Transformers defines it: `json.dumps(x,
/// ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
/// The first positional argument is `ensure_ascii`, as in Transformers'
/// signature.
fn tojson(value: &Value, ensure_ascii: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let ensure_ascii = match ensure_ascii {
        Some(v) => v.is_true(),
        None => kwargs
            .get::<Option<Value>>("ensure_ascii")?
            .is_some_and(|v| v.is_true()),
    };
    let indent = match kwargs.get::<Option<Value>>("indent")? {
        None => None,
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_owned()),
            None => Some(" ".repeat(usize::try_from(v)?)),
        },
    };
    let (item_separator, key_separator) = match kwargs.get::<Option<Value>>("separators")? {
        Some(v) if !v.is_none() && !v.is_undefined() => {
            let parts: Vec<Value> = v.try_iter()?.collect();
            match parts.as_slice() {
                [item, key] => (item.to_string(), key.to_string()),
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: `separators` must be two strings",
                    ));
                }
            }
        }
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    let sort_keys = kwargs
        .get::<Option<Value>>("sort_keys")?
        .is_some_and(|v| v.is_true());
    kwargs.assert_all_used()?;
    let style = JsonStyle {
        indent,
        item_separator,
        key_separator,
        sort_keys,
        ensure_ascii,
    };
    let mut out = String::new();
    write_json(&mut out, value, &style, 0)?;
    Ok(Value::from_safe_string(out))
}

fn write_json(
    out: &mut String,
    value: &Value,
    style: &JsonStyle,
    depth: usize,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if value.is_integer() {
                let _ = write!(out, "{value}");
            } else {
                out.push_str(&python_float(f64::try_from(value.clone())?));
            }
        }
        ValueKind::String | ValueKind::Plain => write_string(out, &value.to_string(), style),
        ValueKind::Bytes => {
            let items: Vec<Value> = value
                .as_bytes()
                .unwrap_or_default()
                .iter()
                .map(|b| Value::from(*b))
                .collect();
            write_json(out, &Value::from(items), style, depth)?;
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, '[', ']', items.len(), style, depth, |out, i| {
                write_json(out, &items[i], style, depth + 1)
            })?;
        }
        ValueKind::Map => {
            let mut entries: Vec<(String, Value)> = value
                .try_iter()?
                .map(|key| {
                    let item = value.get_item(&key)?;
                    Ok((key_text(&key)?, item))
                })
                .collect::<Result<_, Error>>()?;
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            write_container(out, '{', '}', entries.len(), style, depth, |out, i| {
                let (key, item) = &entries[i];
                write_string(out, key, style);
                out.push_str(&style.key_separator);
                write_json(out, item, style, depth + 1)
            })?;
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: cannot write a {} as JSON", value.kind()),
            ));
        }
    }
    Ok(())
}

/// A key as Python's `json.dumps` writes it: strings as they are, numbers,
/// booleans and `None` as their JSON text.
fn key_text(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.to_string()),
        ValueKind::None => Ok("null".to_owned()),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.to_owned()),
        ValueKind::Number if key.is_integer() => Ok(key.to_string()),
        ValueKind::Number => Ok(python_float(f64::try_from(key.clone())?)),
        other => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be strings, not {other}"),
        )),
    }
}

fn write_container(
    out: &mut String,
    open: char,
    close: char,
    len: usize,
    style: &JsonStyle,
    depth: usize,
    mut item: impl FnMut(&mut String, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if len == 0 {
        out.push(close);
        return Ok(());
    }
    for i in 0..len {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        if let Some(indent) = &style.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth + 1));
        }
        item(out, i)?;
    }
    if let Some(indent) = &style.indent {
        out.push('\n');
        out.push_str(&indent.repeat(depth));
    }
    out.push(close);
    Ok(())
}

/// A JSON string as Python writes it: `"` and `\` escaped, control
/// characters as `\n`, `\t`, … or `\u00XX`; with `ensure_ascii`, every
/// non-ASCII character as `\uXXXX` (UTF-16).
fn write_string(out: &mut String, text: &str, style: &JsonStyle) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (style.ensure_ascii && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Python's `repr` writes it (which `json.dumps` uses): the
/// shortest digits that read back the same, in exponent form below 1e-4
/// and from 1e16 on, otherwise with at least one decimal.
fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `1.5e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..16).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let text = f.to_string();
    if text.contains('.') {
        text
    } else {
        format!("{text}.0")
    }
}

// --- strftime_now -------------------------------------------------------

/// The current time (UTC) in `format`'s `%` directives, as Python's
/// `datetime.now().strftime(format)`: `%Y %y %m %d %e %j %H %I %M %S %p
/// %b %B %a %A %%`, and a `-` after `%` to drop the padding (`%-d`).
/// Other directives are kept as written.
fn strftime_now(format: String) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    strftime(&format, secs)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `format` for the time `secs` seconds after the Unix epoch (UTC).
pub(crate) fn strftime(format: &str, secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday (index 3 from Monday).
    let weekday = (days + 3).rem_euclid(7) as usize;
    let is_leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let before = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][(month - 1) as usize];
    let yday = before + day + u32::from(is_leap && month > 2);
    let hour12 = match hour % 12 {
        0 => 12,
        h => h,
    };

    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let unpadded = chars.next_if_eq(&'-').is_some();
        let Some(directive) = chars.next() else {
            out.push('%');
            if unpadded {
                out.push('-');
            }
            break;
        };
        let number = |n: u64, width: usize| {
            if unpadded {
                n.to_string()
            } else {
                format!("{n:0width$}")
            }
        };
        match directive {
            'Y' => out.push_str(&year.to_string()),
            'y' => out.push_str(&number(year.rem_euclid(100) as u64, 2)),
            'm' => out.push_str(&number(u64::from(month), 2)),
            'd' => out.push_str(&number(u64::from(day), 2)),
            'e' => out.push_str(&format!("{day:>2}")),
            'j' => out.push_str(&number(u64::from(yday), 3)),
            'H' => out.push_str(&number(hour, 2)),
            'I' => out.push_str(&number(hour12, 2)),
            'M' => out.push_str(&number(minute, 2)),
            'S' => out.push_str(&number(second, 2)),
            'p' => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            'b' => out.push_str(&MONTHS[(month - 1) as usize][..3]),
            'B' => out.push_str(MONTHS[(month - 1) as usize]),
            'a' => out.push_str(&WEEKDAYS[weekday][..3]),
            'A' => out.push_str(WEEKDAYS[weekday]),
            '%' => out.push('%'),
            other => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
        }
    }
    out
}

/// The date `days` days after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use minijinja::context;

    use super::*;

    fn render(source: &str, ctx: Value) -> String {
        let env = environment();
        env.render_str(source, ctx).unwrap()
    }

    #[test]
    fn tojson_writes_json_as_pythons_json_dumps() {
        let value = json_to_value(
            &serde_json::json!({"b": [1, 2.5, 1e20, 1e-7, true, null], "a": "Ünï \"<&>'\n"}),
            &|s| s.to_owned(),
        );
        // serde_json's map (without `preserve_order`) sorts its keys.
        assert_eq!(
            render("{{ v | tojson }}", context! { v => value.clone() }),
            r#"{"a": "Ünï \"<&>'\n", "b": [1, 2.5, 1e+20, 1e-07, true, null]}"#
        );
        assert_eq!(
            render(
                "{{ v | tojson(indent=2, sort_keys=true) }}",
                context! { v => value.clone() }
            ),
            "{\n  \"a\": \"Ünï \\\"<&>'\\n\",\n  \"b\": [\n    1,\n    2.5,\n    1e+20,\n    1e-07,\n    true,\n    null\n  ]\n}"
        );
        assert_eq!(
            render(
                "{{ v | tojson(separators=(',', ':'), ensure_ascii=true) }}",
                context! { v => value }
            ),
            r#"{"a":"\u00dcn\u00ef \"<&>'\n","b":[1,2.5,1e+20,1e-07,true,null]}"#
        );
        assert_eq!(
            render("{{ {'z': 1, 'y': []} | tojson }}", context! {}),
            r#"{"z": 1, "y": []}"#
        );
        assert_eq!(render("{{ 1.0 | tojson }}", context! {}), "1.0");
    }

    #[test]
    fn python_methods_loop_controls_and_namespaces_work() {
        let source = "{% set ns = namespace(n=0) %}{% for x in xs %}{% if x.startswith('#') %}{% continue %}{% endif %}{% if x == 'stop' %}{% break %}{% endif %}{% set ns.n = ns.n + 1 %}[{{ x.strip() }}]{% endfor %}{{ ns.n }} {{ 'a</t>b'.split('</t>')[-1] }}";
        assert_eq!(
            render(
                source,
                context! { xs => vec![" a ", "#c", "b", "stop", "d"] }
            ),
            "[a][b]2 b"
        );
    }

    #[test]
    fn blocks_are_trimmed_as_jinja2_is_set_up_by_transformers() {
        assert_eq!(
            render("  {% if true %}\nyes\n  {% endif %}\nend\n", context! {}),
            "yes\nend"
        );
    }

    #[test]
    fn raise_exception_fails_the_rendering_with_its_message() {
        let env = environment();
        let error = env
            .render_str("{{ raise_exception('no system role') }}", context! {})
            .unwrap_err();
        assert_eq!(
            error.detail(),
            Some("the template raised an exception: no system role")
        );
    }

    #[test]
    fn strftime_formats_like_python() {
        // 2024-07-26 13:25:09 UTC, a Friday.
        let t = 1_722_000_309;
        assert_eq!(
            strftime("%d %b %Y|%-d %B %y|%H:%M:%S %I%p|%a %A|%j|%e|%%|%q", t),
            "26 Jul 2024|26 July 24|13:25:09 01PM|Fri Friday|208|26|%|%q"
        );
        assert_eq!(strftime("%Y-%m-%d", 0), "1970-01-01");
        assert_eq!(strftime("%Y-%m-%d %j", 951_782_400), "2000-02-29 060");
    }
}
