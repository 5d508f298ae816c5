//! A statement's parameters renamed, outside its quoted text: a mechanism file names them
//! (`:merchant`, `:id`, `:token`) and every store binds them by position (`?1`, `?2`,
//! the convention of `fencesim_model::store::Statements`). The two directions are inverse,
//! so a built-in statement written out and read back is the same text.

/// `sql` with each parameter of `from` (outside quotes, and not the start of a longer
/// name) written as the one at the same place in `to`.
pub fn renamed(sql: &str, from: &[&str], to: &[&str]) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        if quote.is_none() {
            let hit = from.iter().position(|name| {
                rest.starts_with(name)
                    && !rest[name.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            });
            if let Some(at) = hit {
                out.push_str(to[at]);
                rest = &rest[from[at].len()..];
                continue;
            }
        }
        quote = match (quote, c) {
            (None, '\'' | '"') => Some(c),
            (Some(open), close) if open == close => None,
            (state, _) => state,
        };
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A write's parameters by name, as the store binds them by position.
pub fn positional_write(sql: &str, fenced: bool) -> String {
    match fenced {
        true => renamed(sql, &[":token", ":id"], &["?1", "?2"]),
        false => renamed(sql, &[":id"], &["?1"]),
    }
}

/// A write's parameters by position, named.
pub fn named_write(sql: &str, fenced: bool) -> String {
    match fenced {
        true => renamed(sql, &["?1", "?2"], &[":token", ":id"]),
        false => renamed(sql, &["?1"], &[":id"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_renamed_outside_quotes_only_and_back_again() {
        let named = "UPDATE refund SET state = ':id', fence = :token WHERE id = :id AND fence < :token";
        let positional = positional_write(named, true);
        assert_eq!(positional, "UPDATE refund SET state = ':id', fence = ?1 WHERE id = ?2 AND fence < ?1");
        assert_eq!(named_write(&positional, true), named);
        assert_eq!(renamed(":identity = :id", &[":id"], &["?1"]), ":identity = ?1", "a longer name is kept");
        assert_eq!(positional_write("WHERE id = :id", false), "WHERE id = ?1");
    }
}
