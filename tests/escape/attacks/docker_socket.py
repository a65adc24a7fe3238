"""Container-engine socket: talk to the host's Docker daemon over its Unix socket (root on
the host for anyone who can reach it)."""
import socket


def run(x):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/var/run/docker.sock")
    s.sendall(b"GET /containers/json HTTP/1.0\r\n\r\n")
    print("DOCKER:", s.recv(4096))
    return x + 1
