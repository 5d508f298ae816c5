//! Typed identifiers and quantities. Money is integer cents, never a float.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A settlement worker. Displayed as a letter: worker 0 is `A`, worker 1 is `B`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(pub u32);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 26 {
            write!(f, "{}", (b'A' + self.0 as u8) as char)
        } else {
            write!(f, "W{}", self.0)
        }
    }
}

/// A merchant, displayed `m_4471`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MerchantId(pub u32);

impl fmt::Display for MerchantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m_{}", self.0)
    }
}

/// A refund row, displayed `r_001` ... `r_1200`. It is also the gateway's idempotency key
/// and the reference a refund is looked up by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RefundId(pub u32);

impl fmt::Display for RefundId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r_{:03}", self.0)
    }
}

/// A fencing token: the number a lease holder carries into every write it makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Token(pub i64);

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An amount of money in euro cents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cents(pub i64);

impl fmt::Display for Cents {
    /// `8430000` is shown as `84,300.00 EUR`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let (euros, cents) = (abs / 100, abs % 100);
        write!(f, "{sign}{}.{cents:02} EUR", group_thousands(euros))
    }
}

/// `84300` is written `84,300`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    grouped
}

impl std::iter::Sum for Cents {
    fn sum<I: Iterator<Item = Cents>>(iter: I) -> Cents {
        Cents(iter.map(|c| c.0).sum())
    }
}

/// A settlement job: settle every open refund of one merchant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId(pub u32);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job#{}", self.0)
    }
}

/// The gateway's own number for one movement of money, displayed `gw#908`: never `#908`
/// or `r_908`, which a reader would take for the refund row of that number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatewayRef(pub u32);

impl fmt::Display for GatewayRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gw#{}", self.0)
    }
}

impl FromStr for WorkerId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        match bytes {
            [c] if c.is_ascii_uppercase() => Ok(WorkerId(u32::from(c - b'A'))),
            [b'W', rest @ ..] if !rest.is_empty() => std::str::from_utf8(rest)
                .ok()
                .and_then(|n| n.parse().ok())
                .map(WorkerId)
                .ok_or_else(|| format!("bad worker '{s}': expected a letter A-Z or W<number>")),
            _ => Err(format!("bad worker '{s}': expected a letter A-Z or W<number>")),
        }
    }
}

fn parse_prefixed(s: &str, prefix: &str, what: &str) -> Result<u32, String> {
    s.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("bad {what} '{s}': expected {prefix}<number>"))
}

impl FromStr for MerchantId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_prefixed(s, "m_", "merchant").map(MerchantId)
    }
}

impl FromStr for RefundId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_prefixed(s, "r_", "refund").map(RefundId)
    }
}

/// Worker, merchant and refund ids travel as the strings people read (`"A"`, `"m_4471"`,
/// `"r_815"`), in traces and replay files alike.
macro_rules! serde_as_display {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}

serde_as_display!(WorkerId, MerchantId, RefundId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_display_as_the_domain_writes_them() {
        assert_eq!(WorkerId(0).to_string(), "A");
        assert_eq!(WorkerId(1).to_string(), "B");
        assert_eq!(WorkerId(30).to_string(), "W30");
        assert_eq!(RefundId(1).to_string(), "r_001");
        assert_eq!(RefundId(815).to_string(), "r_815");
        assert_eq!(RefundId(1200).to_string(), "r_1200");
        assert_eq!(MerchantId(4471).to_string(), "m_4471");
        assert_eq!(GatewayRef(908).to_string(), "gw#908");
    }

    #[test]
    fn ids_parse_back_from_their_display_and_refuse_garbage() {
        for w in [WorkerId(0), WorkerId(25), WorkerId(26), WorkerId(400)] {
            assert_eq!(w.to_string().parse::<WorkerId>(), Ok(w));
        }
        assert_eq!("r_815".parse::<RefundId>(), Ok(RefundId(815)));
        assert_eq!("m_4471".parse::<MerchantId>(), Ok(MerchantId(4471)));
        assert!("a".parse::<WorkerId>().unwrap_err().contains("bad worker 'a'"));
        assert_eq!("W".parse::<WorkerId>(), Ok(WorkerId(22)));
        assert!("Wx".parse::<WorkerId>().is_err());
        assert!("815".parse::<RefundId>().unwrap_err().contains("expected r_<number>"));
    }

    #[test]
    fn cents_display_in_euros_with_grouping() {
        assert_eq!(Cents(8_430_000).to_string(), "84,300.00 EUR");
        assert_eq!(Cents(7025).to_string(), "70.25 EUR");
        assert_eq!(Cents(5).to_string(), "0.05 EUR");
        assert_eq!(Cents(-123_456).to_string(), "-1,234.56 EUR");
        assert_eq!(Cents(100_000_000).to_string(), "1,000,000.00 EUR");
    }
}
