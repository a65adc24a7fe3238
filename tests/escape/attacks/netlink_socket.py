"""Netlink: a raw NETLINK_ROUTE socket (configure interfaces, routes; kernel attack surface)."""
import socket


def run(x):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.bind((0, 0))
    return x + 1
