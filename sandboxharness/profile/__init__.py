"""Profile evidence: Nsight Compute output parsed on the trusted side into a signature.

The profiler runs inside the sandbox around the candidate's call; its raw text comes out as
untrusted data. :mod:`.ncu_parse` reads it under explicit caps, :mod:`.classify` names the
bottleneck from the metrics, and :mod:`.signature` holds the result.
"""
