"""Multi-process jobs: ending every process when one fails (`job_failure`) and checking
that processes sharing a mesh trace alike (`trace_agreement`)."""
