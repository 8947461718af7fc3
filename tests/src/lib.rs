//! Helpers shared by the end-to-end tests in `tests/tests/`: locating the built
//! `culprit` binary and `libtrace.so`, compiling C test programs, running commands
//! with a deadline.
