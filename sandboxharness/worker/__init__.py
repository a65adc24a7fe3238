"""The only code that runs inside the sandbox: stdlib + torch (+ safetensors), nothing else.

Importing this package must stay cheap and must not import the rest of the harness.
"""
