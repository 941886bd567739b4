"""Faults a test asks for by name, to prove what a killed or failing process leaves behind."""

from __future__ import annotations

import os

# "kill_after_step:N", "kill_in_checkpoint:N", "disk_full_in_cache:RANK", "stall_in_training:RANK" (train);
# "export_job_fails:VARIANT", "export_job_killed:VARIANT", "export_job_stalls:VARIANT" (a parallel export's worker,
# after that variant's build wrote its file: an error raised, the worker killed by SIGKILL, or the worker asleep
# until it is stopped)
FAULT_ENV = "POCKETBERT_FAULT"


def fault_asked(kind: str, at) -> bool:
    return os.environ.get(FAULT_ENV) == f"{kind}:{at}"
