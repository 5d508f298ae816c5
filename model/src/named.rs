//! Enums chosen by name on the command line and in replay files: display, parse (with an
//! error that lists the choices) and serde, all by the enum's `name()` over its `ALL`.

/// `named_enum!(Type, "what")` for a `Copy` enum with `const ALL` and `fn name(self)`.
#[macro_export]
macro_rules! named_enum {
    ($t:ty, $what:literal) => {
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $t {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$t>::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = <$t>::ALL.iter().map(|m| m.name()).collect();
                    format!("unknown {} '{s}': expected one of {}", $what, names.join(", "))
                })
            }
        }

        impl ::serde::Serialize for $t {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $t {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <String as ::serde::Deserialize>::deserialize(d)?.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}
