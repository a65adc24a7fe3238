"""DNS: resolve an outside name (a channel out even where TCP is blocked)."""
import socket


def run(x):
    found = socket.getaddrinfo("example.com", 443)
    print("resolved:", found)
    return x + 1
