//! Errno names accepted by `errno=NAME`, and the reverse mapping for display.
//!
//! The table holds the Linux values (from `libc`), so a SPEC written on one machine means
//! the same errno on every Linux target this crate builds for.

/// Every errno name the grammar accepts, with its value. Aliases (`EWOULDBLOCK`,
/// `ENOTSUP`, `EDEADLOCK`) come after their primary name so [`errno_name`] prefers
/// the primary one.
pub const ERRNO_NAMES: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("ESRCH", libc::ESRCH),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("ENOEXEC", libc::ENOEXEC),
    ("EBADF", libc::EBADF),
    ("ECHILD", libc::ECHILD),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ENOTTY", libc::ENOTTY),
    ("ETXTBSY", libc::ETXTBSY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("EPIPE", libc::EPIPE),
    ("ERANGE", libc::ERANGE),
    ("EDEADLK", libc::EDEADLK),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOLCK", libc::ENOLCK),
    ("ENOSYS", libc::ENOSYS),
    ("ENODATA", libc::ENODATA),
    ("ETIME", libc::ETIME),
    ("EPROTO", libc::EPROTO),
    ("EBADMSG", libc::EBADMSG),
    ("EOVERFLOW", libc::EOVERFLOW),
    ("ENOTSOCK", libc::ENOTSOCK),
    ("EDESTADDRREQ", libc::EDESTADDRREQ),
    ("EMSGSIZE", libc::EMSGSIZE),
    ("EPROTOTYPE", libc::EPROTOTYPE),
    ("ENOPROTOOPT", libc::ENOPROTOOPT),
    ("EPROTONOSUPPORT", libc::EPROTONOSUPPORT),
    ("ESOCKTNOSUPPORT", libc::ESOCKTNOSUPPORT),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EPFNOSUPPORT", libc::EPFNOSUPPORT),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("EADDRINUSE", libc::EADDRINUSE),
    ("EADDRNOTAVAIL", libc::EADDRNOTAVAIL),
    ("ENETDOWN", libc::ENETDOWN),
    ("ENETUNREACH", libc::ENETUNREACH),
    ("ENETRESET", libc::ENETRESET),
    ("ECONNABORTED", libc::ECONNABORTED),
    ("ECONNRESET", libc::ECONNRESET),
    ("ENOBUFS", libc::ENOBUFS),
    ("EISCONN", libc::EISCONN),
    ("ENOTCONN", libc::ENOTCONN),
    ("ESHUTDOWN", libc::ESHUTDOWN),
    ("ETOOMANYREFS", libc::ETOOMANYREFS),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("EHOSTDOWN", libc::EHOSTDOWN),
    ("EHOSTUNREACH", libc::EHOSTUNREACH),
    ("EALREADY", libc::EALREADY),
    ("EINPROGRESS", libc::EINPROGRESS),
    ("ECANCELED", libc::ECANCELED),
    ("EWOULDBLOCK", libc::EWOULDBLOCK),
    ("ENOTSUP", libc::ENOTSUP),
    ("EDEADLOCK", libc::EDEADLOCK),
];

/// The value of an errno name (`"ECONNRESET"` → 104). Case-sensitive, as in C.
pub fn errno_from_name(name: &str) -> Option<i32> {
    ERRNO_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| v)
}

/// The primary name of an errno value (104 → `"ECONNRESET"`), if it is in the table.
pub fn errno_name(value: i32) -> Option<&'static str> {
    ERRNO_NAMES
        .iter()
        .find(|&&(_, v)| v == value)
        .map(|&(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_primary_names_win() {
        for &(n, v) in ERRNO_NAMES {
            assert_eq!(errno_from_name(n), Some(v));
            assert!(v > 0 && v < 4096, "{n}");
            let primary = errno_name(v).unwrap();
            assert_eq!(errno_from_name(primary), Some(v));
        }
        assert_eq!(errno_from_name("ECONNRESET"), Some(libc::ECONNRESET));
        assert_eq!(errno_name(libc::EAGAIN), Some("EAGAIN"));
        assert_eq!(errno_name(libc::EOPNOTSUPP), Some("EOPNOTSUPP"));
        assert_eq!(errno_from_name("econnreset"), None);
        assert_eq!(errno_name(0), None);
    }

    #[test]
    fn primary_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &(n, _) in ERRNO_NAMES {
            assert!(seen.insert(n), "duplicate name {n}");
        }
    }
}
