//! Fixed identifiers of the libc functions the tracer wraps.
//!
//! The id goes in the callee field of `LibEnter`/`LibExit` entries, so the analyzer
//! recognizes `connect` or `recv` without symbols. Ids are small (< 4096), so they can
//! never collide with a real function address. **Ids are part of the on-disk format:
//! never renumber one; append new ones.**

macro_rules! libfns {
    ($($name:ident = $id:literal => $s:literal,)*) => {
        /// A wrapped libc function.
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)]
        pub enum LibFn { $($name = $id,)* }

        impl LibFn {
            /// Every id, in numeric order.
            pub const ALL: &'static [LibFn] = &[$(LibFn::$name,)*];

            /// The id from its numeric value.
            #[inline]
            pub fn from_id(id: u64) -> Option<LibFn> {
                match id { $($id => Some(LibFn::$name),)* _ => None }
            }

            /// The libc name.
            pub fn name(self) -> &'static str {
                match self { $(LibFn::$name => $s,)* }
            }

            /// The id from the libc name.
            pub fn from_name(s: &str) -> Option<LibFn> {
                match s { $($s => Some(LibFn::$name),)* _ => None }
            }
        }
    };
}

libfns! {
    Socket = 1 => "socket",
    Socketpair = 2 => "socketpair",
    Bind = 3 => "bind",
    Listen = 4 => "listen",
    Accept = 5 => "accept",
    Accept4 = 6 => "accept4",
    Connect = 7 => "connect",
    Shutdown = 8 => "shutdown",
    Close = 9 => "close",
    Send = 10 => "send",
    Sendto = 11 => "sendto",
    Sendmsg = 12 => "sendmsg",
    Recv = 13 => "recv",
    Recvfrom = 14 => "recvfrom",
    Recvmsg = 15 => "recvmsg",
    Read = 16 => "read",
    Write = 17 => "write",
    Readv = 18 => "readv",
    Writev = 19 => "writev",
    Dup = 20 => "dup",
    Dup2 = 21 => "dup2",
    Dup3 = 22 => "dup3",
    Fcntl = 23 => "fcntl",
    Getsockopt = 24 => "getsockopt",
    Select = 25 => "select",
    Pselect = 26 => "pselect",
    Poll = 27 => "poll",
    Ppoll = 28 => "ppoll",
    EpollWait = 29 => "epoll_wait",
    EpollPwait = 30 => "epoll_pwait",
    EpollCtl = 31 => "epoll_ctl",
    Fork = 32 => "fork",
    Vfork = 33 => "vfork",
    Execve = 34 => "execve",
    Execv = 35 => "execv",
    Execvp = 36 => "execvp",
    Execvpe = 37 => "execvpe",
    Execl = 38 => "execl",
    Execlp = 39 => "execlp",
    Execle = 40 => "execle",
    Fexecve = 41 => "fexecve",
    PosixSpawn = 42 => "posix_spawn",
    PosixSpawnp = 43 => "posix_spawnp",
    Daemon = 44 => "daemon",
    Exit = 45 => "exit",
    UExit = 46 => "_exit",
    UExitC = 47 => "_Exit",
    Sendmmsg = 48 => "sendmmsg",
    Recvmmsg = 49 => "recvmmsg",
    Execveat = 50 => "execveat",
    EpollPwait2 = 51 => "epoll_pwait2",
}

impl LibFn {
    /// The numeric id (the callee field).
    pub fn id(self) -> u64 {
        self as u16 as u64
    }

    /// Calls that receive data from a connection (start a handler unit).
    pub fn is_receive(self) -> bool {
        use LibFn::*;
        matches!(self, Recv | Recvfrom | Recvmsg | Recvmmsg | Read | Readv)
    }

    /// Calls that send data on a connection.
    pub fn is_send(self) -> bool {
        use LibFn::*;
        matches!(self, Send | Sendto | Sendmsg | Sendmmsg | Write | Writev)
    }

    /// Event multiplexers (the body of an event loop calls one).
    pub fn is_multiplexer(self) -> bool {
        use LibFn::*;
        matches!(
            self,
            Select | Pselect | Poll | Ppoll | EpollWait | EpollPwait | EpollPwait2
        )
    }

    /// Calls that establish connections (their call stacks identify a connection).
    pub fn is_connection_setup(self) -> bool {
        use LibFn::*;
        matches!(self, Bind | Connect | Listen | Accept | Accept4)
    }

    /// Calls that say what a descriptor is (a socket, its addresses, the code that set it
    /// up, a copy, its end): replayed to know each descriptor's connection, and kept by a
    /// flight recorder when it rotates the rest of a record away.
    pub fn describes_descriptor(self) -> bool {
        use LibFn::*;
        self.is_connection_setup()
            || matches!(
                self,
                Socket | Socketpair | Close | Dup | Dup2 | Dup3 | Fcntl
            )
    }

    /// Calls that accept a connection.
    pub fn is_accept(self) -> bool {
        matches!(self, LibFn::Accept | LibFn::Accept4)
    }

    /// The `exec*` family (and `posix_spawn*`, which exec in a child).
    pub fn is_exec(self) -> bool {
        use LibFn::*;
        matches!(
            self,
            Execve | Execv | Execvp | Execvpe | Execl | Execlp | Execle | Fexecve | Execveat
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &f in LibFn::ALL {
            assert!(seen.insert(f.id()), "duplicate id {}", f.id());
            assert!(f.id() > 0 && f.id() < 4096);
            assert_eq!(LibFn::from_id(f.id()), Some(f));
            assert_eq!(LibFn::from_name(f.name()), Some(f));
        }
        assert_eq!(LibFn::from_id(0), None);
        assert_eq!(
            LibFn::Recv.id(),
            13,
            "ids are on-disk format: never renumber"
        );
    }
}
