//! Mechanisms read from files, beside the built-in ones: each is defined once per process
//! (its spec and the file's text kept for the process's life, so that a `Mechanism` stays
//! a small `Copy` value) and is then found by its name like any other, on the command
//! line, in a replay file and in a worker process's spec.

use super::{Mechanism, Spec};
use std::sync::Mutex;

/// A mechanism defined by a file: the spec read from it and the text it was read from.
#[derive(Debug)]
pub struct Defined {
    pub spec: Spec,
    pub text: &'static str,
}

/// A handle on a file's mechanism; two handles are equal when they name the same one
/// (a process defines a name once).
#[derive(Clone, Copy, Debug)]
pub struct FromFile(pub(super) &'static Defined);

impl PartialEq for FromFile {
    fn eq(&self, other: &FromFile) -> bool {
        self.0.spec.name == other.0.spec.name
    }
}

impl Eq for FromFile {}

impl std::hash::Hash for FromFile {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.spec.name.hash(state);
    }
}

impl PartialOrd for FromFile {
    fn partial_cmp(&self, other: &FromFile) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FromFile {
    fn cmp(&self, other: &FromFile) -> std::cmp::Ordering {
        self.0.spec.name.cmp(other.0.spec.name)
    }
}

/// The mechanisms this process has read from files, in the order they were defined.
static DEFINED: Mutex<Vec<&'static Defined>> = Mutex::new(Vec::new());

fn defined() -> std::sync::MutexGuard<'static, Vec<&'static Defined>> {
    DEFINED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Mechanism {
    /// Defines the mechanism a file describes, `spec` read from `text`. A name a built-in
    /// mechanism has is refused (a copy of a built-in file must be renamed), and so is a
    /// second, different text under a name already defined; the same text again gives the
    /// same mechanism.
    pub fn define(spec: Spec, text: &str) -> Result<Mechanism, String> {
        let name = spec.name;
        if Mechanism::ALL.iter().any(|m| m.name() == name) {
            return Err(format!(
                "the name '{name}' is a built-in mechanism's: give the file's mechanism a name of its own"
            ));
        }
        let mut files = defined();
        if let Some(known) = files.iter().find(|d| d.spec.name == name) {
            return match known.text == text {
                true => Ok(Mechanism::File(FromFile(known))),
                false => Err(format!("two different mechanism files are both named '{name}'")),
            };
        }
        let text: &'static str = Box::leak(text.to_owned().into_boxed_str());
        let known: &'static Defined = Box::leak(Box::new(Defined { spec, text }));
        files.push(known);
        Ok(Mechanism::File(FromFile(known)))
    }

    /// Every mechanism this process knows: the built-in ones, then those read from files.
    pub fn known() -> Vec<Mechanism> {
        let files = defined();
        Mechanism::ALL.into_iter().chain(files.iter().map(|d| Mechanism::File(FromFile(d)))).collect()
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mechanism {
    type Err = String;

    fn from_str(s: &str) -> Result<Mechanism, String> {
        let known = Mechanism::known();
        known.iter().copied().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<&str> = known.iter().map(|m| m.name()).collect();
            format!("unknown mechanism '{s}': expected one of {}", names.join(", "))
        })
    }
}

impl serde::Serialize for Mechanism {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Mechanism {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mechanism, D::Error> {
        <String as serde::Deserialize>::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &'static str) -> Spec {
        Spec { name, promise: "a test's own", ..Spec::BASE }
    }

    #[test]
    fn a_file_mechanism_is_found_by_its_name_and_keeps_its_spec() {
        let ours = Mechanism::define(spec("test-own-lock"), "text one").unwrap();
        assert_eq!("test-own-lock".parse::<Mechanism>(), Ok(ours));
        assert_eq!(ours.spec().promise, "a test's own");
        assert_eq!(ours.file_text(), Some("text one"));
        assert_eq!(serde_json::to_string(&ours).unwrap(), "\"test-own-lock\"");
        assert_eq!(serde_json::from_str::<Mechanism>("\"test-own-lock\"").unwrap(), ours);
        assert!(Mechanism::known().contains(&ours) && !Mechanism::ALL.contains(&ours));
        assert_eq!(Mechanism::define(spec("test-own-lock"), "text one"), Ok(ours), "the same text again");
    }

    #[test]
    fn a_built_in_name_or_a_second_text_under_one_name_is_refused() {
        let err = Mechanism::define(spec("fenced"), "x").unwrap_err();
        assert!(err.contains("'fenced' is a built-in mechanism's"), "{err}");
        Mechanism::define(spec("test-twice"), "first").unwrap();
        let err = Mechanism::define(spec("test-twice"), "second").unwrap_err();
        assert!(err.contains("two different mechanism files are both named 'test-twice'"), "{err}");
    }
}
