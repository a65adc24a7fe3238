"""Memory bomb: touch 64 MiB chunks until something stops it (up to 32 GiB)."""
chunks = []


def run(x):
    for _ in range(512):
        chunk = bytearray(64 * 1024 * 1024)
        chunk[::4096] = b"\x01" * len(chunk[::4096])  # make every page resident
        chunks.append(chunk)
    return x + 1
