//! Timestamps, in the few forms saphan writes: RFC 3339 UTC for records
//! and rows, and a compact `20261129T153000Z` for ids and directory names.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Now, RFC 3339 UTC with the clock's full precision (attempt records).
pub fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// `ago` before now, RFC 3339 UTC with the clock's full precision: when
/// something timed by an [`std::time::Instant`] began (an attempt's
/// `started_at` when it ended before its suite ran).
pub fn rfc3339_before(ago: std::time::Duration) -> String {
    let now = OffsetDateTime::now_utc();
    now.checked_sub(time::Duration::try_from(ago).unwrap_or(time::Duration::ZERO))
        .unwrap_or(now)
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// Now, RFC 3339 UTC in whole seconds (`2026-11-29T15:30:00Z`): ledger
/// rows and stream registry entries.
pub fn now_rfc3339_seconds() -> String {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0)
        .unwrap_or(now)
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// Parse an RFC 3339 timestamp.
pub fn parse_rfc3339(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

/// An RFC 3339 timestamp shown to the second (`2026-11-29T15:30:00Z`),
/// for human screens; the text as given when it does not parse.
pub fn to_seconds(s: &str) -> String {
    parse_rfc3339(s)
        .and_then(|t| t.replace_nanosecond(0).ok())
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| s.to_string())
}

/// Now, compact UTC (`20261129T153000Z`): record ids, archive directories.
pub fn now_compact() -> String {
    let f = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    OffsetDateTime::now_utc().format(&f).unwrap_or_default()
}
