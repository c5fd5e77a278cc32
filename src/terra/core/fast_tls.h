// Thread-locals read on every op call. A shared library's thread-locals default to the
// general-dynamic model: each read calls into the dynamic loader (_dl_tlsdesc_return, ~3 % of a
// co-executed add's host samples). Initial-exec reads them at a fixed offset from %fs. It takes
// static TLS space, which a library loaded by dlopen (Python's import) shares with every other:
// only small scalars and pointers get it, never objects.
#pragma once

#if defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define TERRA_FAST_TLS __attribute__((tls_model("initial-exec")))
#else
#define TERRA_FAST_TLS
#endif
