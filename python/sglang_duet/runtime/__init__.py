"""The duet runtime: a thin adapter that runs DuetPolicy's BatchPlans inside SGLang's scheduler.

Import `sglang_duet.runtime.scheduler` only inside the scheduler process (it imports SGLang).
"""
