"""Raw sockets: AF_PACKET (sniff/inject frames) and raw ICMP."""
import socket


def run(x):
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    return x + 1
