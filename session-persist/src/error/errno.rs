//! Node's error code names (`ENOENT`, `ENOSPC`, …) for I/O errors: the one table every backend
//! uses to print `<CODE>: <description>, <op> '<path>'`, as the reference's messages do.

use std::io;

/// The Node error code (`ENOENT`, `ENOSPC`, `EBADF`, …) of an I/O error, when one is known: by
/// the OS error number when the error carries one, else by its [`io::ErrorKind`].
///
/// The numeric table lists only numbers that agree on Linux and macOS; the kind table covers
/// errors built without an OS number (test doubles, wrapped decoder errors).
#[must_use]
pub fn io_code(e: &io::Error) -> Option<&'static str> {
    if let Some(raw) = e.raw_os_error() {
        let code = match raw {
            1 => Some("EPERM"),
            2 => Some("ENOENT"),
            5 => Some("EIO"),
            9 => Some("EBADF"),
            13 => Some("EACCES"),
            16 => Some("EBUSY"),
            17 => Some("EEXIST"),
            18 => Some("EXDEV"),
            20 => Some("ENOTDIR"),
            21 => Some("EISDIR"),
            22 => Some("EINVAL"),
            24 => Some("EMFILE"),
            27 => Some("EFBIG"),
            28 => Some("ENOSPC"),
            30 => Some("EROFS"),
            31 => Some("EMLINK"),
            _ => None,
        };
        if code.is_some() {
            return code;
        }
    }
    match e.kind() {
        io::ErrorKind::NotFound => Some("ENOENT"),
        io::ErrorKind::PermissionDenied => Some("EACCES"),
        io::ErrorKind::AlreadyExists => Some("EEXIST"),
        io::ErrorKind::WouldBlock => Some("EAGAIN"),
        io::ErrorKind::InvalidInput => Some("EINVAL"),
        io::ErrorKind::NotADirectory => Some("ENOTDIR"),
        io::ErrorKind::IsADirectory => Some("EISDIR"),
        io::ErrorKind::DirectoryNotEmpty => Some("ENOTEMPTY"),
        io::ErrorKind::ReadOnlyFilesystem => Some("EROFS"),
        io::ErrorKind::StorageFull => Some("ENOSPC"),
        io::ErrorKind::ResourceBusy => Some("EBUSY"),
        io::ErrorKind::CrossesDevices => Some("EXDEV"),
        io::ErrorKind::FileTooLarge => Some("EFBIG"),
        io::ErrorKind::InvalidFilename => Some("ENAMETOOLONG"),
        io::ErrorKind::TooManyLinks => Some("EMLINK"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_numbers_and_kinds_name_their_codes() {
        for (raw, code) in [
            (1, "EPERM"),
            (2, "ENOENT"),
            (5, "EIO"),
            (9, "EBADF"),
            (13, "EACCES"),
            (16, "EBUSY"),
            (17, "EEXIST"),
            (18, "EXDEV"),
            (20, "ENOTDIR"),
            (21, "EISDIR"),
            (22, "EINVAL"),
            (24, "EMFILE"),
            (27, "EFBIG"),
            (28, "ENOSPC"),
            (30, "EROFS"),
            (31, "EMLINK"),
        ] {
            assert_eq!(
                io_code(&io::Error::from_raw_os_error(raw)),
                Some(code),
                "{raw}"
            );
        }
        assert_eq!(
            io_code(&io::Error::new(io::ErrorKind::StorageFull, "full")),
            Some("ENOSPC")
        );
        assert_eq!(io_code(&io::Error::other("x")), None);
    }
}
