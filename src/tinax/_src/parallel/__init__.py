"""`tinax.parallel`: manual SPMD over a mesh (`shard_mapped`), ending every process of a
job when one fails (`job_failure`), and checking that processes sharing a mesh trace alike
(`trace_agreement`)."""
