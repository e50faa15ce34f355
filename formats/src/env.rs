//! Tuning knobs read from the environment (`QKERN_CUDA_*`, `QKERN_WGPU_*`), shared by the
//! backends: an unset or empty variable is `None`, a known value its parse, anything else a
//! typed error naming the variable, its value and what it accepts (a typo is never silently
//! the default).

/// A tuning variable with a value it does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value:?}: expected {expected}")]
pub struct EnvError {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// The knob `name` from the environment, parsed (`parse` gets the value trimmed).
pub fn knob<T>(
    name: &'static str,
    expected: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, EnvError> {
    knob_value(name, std::env::var(name).ok(), expected, parse)
}

/// [`knob`] of a given value (`None`: unset).
pub fn knob_value<T>(
    name: &'static str,
    value: Option<String>,
    expected: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, EnvError> {
    match value {
        Some(v) if !v.trim().is_empty() => match parse(v.trim()) {
            Some(t) => Ok(Some(t)),
            None => Err(EnvError { name, value: v, expected }),
        },
        _ => Ok(None),
    }
}

/// The parse of an on/off knob: `0` or `1`.
pub fn switch(v: &str) -> Option<bool> {
    match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unset or empty is `None`, a known value parses (trimmed), anything else is a typed
    /// error naming the variable.
    #[test]
    fn knobs_reject_unknown_values() {
        let p = |v: &str| match v {
            "a" => Some(1),
            _ => None,
        };
        assert_eq!(knob_value("K", None, "a", p).unwrap(), None);
        assert_eq!(knob_value("K", Some(" ".into()), "a", p).unwrap(), None);
        assert_eq!(knob_value("K", Some(" a ".into()), "a", p).unwrap(), Some(1));
        let e = knob_value("QKERN_WGPU_X", Some("b".into()), "a", p).unwrap_err().to_string();
        assert_eq!(e, "QKERN_WGPU_X=\"b\": expected a");
    }

    #[test]
    fn switches_take_0_and_1_only() {
        assert_eq!(knob_value("K", Some("1".into()), "0 or 1", switch).unwrap(), Some(true));
        assert_eq!(knob_value("K", Some("0".into()), "0 or 1", switch).unwrap(), Some(false));
        for bad in ["on", "true", "2", "01"] {
            assert!(knob_value("K", Some(bad.into()), "0 or 1", switch).is_err(), "{bad}");
        }
    }
}
