"""One positive per remaining Python semgrep rule."""
import base64
import ctypes
import gc
import socket
import sys
import threading

import torch

libc = ctypes.CDLL("libc.so.6")  # expect: py-native-code
conn = socket.create_connection(("example.com", 80))  # expect: py-network
objs = gc.get_objects()  # expect: py-frame-introspection
sys.settrace(None)  # expect: py-trace-hook
threading.Thread(target=print).start()  # expect: py-background-work
side = torch.cuda.Stream()  # expect: py-side-stream-or-graph
blob = base64.b64decode("aW1wb3J0IG9z")  # expect: py-decode-payload
lib = torch.library.Library("aten", "IMPL")  # expect: py-op-override
open("/tmp/out.txt", "w").write("x")  # expect: py-file-write
