"""Network: connect to a listener the harness's machine opened on 127.0.0.1 and talk to it."""
import socket

PORT = int("__PORT__")


def run(x):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=3)
    s.sendall(b"exfiltrated\n")
    s.close()
    return x + 1
