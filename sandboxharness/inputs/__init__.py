"""Inputs from a seed: a case's tensors, made the same way on both sides of the sandbox.

The worker makes a call's inputs itself, inside the sandbox; the host regenerates the very
same ones to check what the call did to them. So this package ships in the worker image beside
``worker/`` and, like it, imports nothing but the stdlib, torch (and safetensors, for blobs):
never the rest of the harness.
"""
