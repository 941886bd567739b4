"""What the `pocketbert` command's exit status means: one meaning per code, so a script or CI can act on it.

    0    success
    1    a finding the command reports by design: `bench compare` found a regression beyond noise (or beyond
         --threshold for a measurement without an interval)
    2    a usage or input error (the environment's launch variables, POCKETBERT_DEBUG and POCKETBERT_ORT_THREADS
         included; for `bench compare`, files it cannot compare in full), or a file-system fault (full disk,
         read-only, no permission): one `error:` line
    70   an internal error, a bug in pocketbert: one line; POCKETBERT_DEBUG=1 adds the traceback above it
         (the exit status stays the same with debugging on)
         (70 is EX_SOFTWARE of BSD's sysexits.h, "internal software error")
    130  interrupted (Ctrl-C): nothing half-written was kept
    143  terminated (SIGTERM): nothing half-written was kept, no staging folder or lock file left (128 + 15, the
         status a shell gives a process SIGTERM ends)
"""

OK = 0
FINDING = 1
USAGE = 2
INTERNAL = 70
INTERRUPTED = 130
TERMINATED = 143
