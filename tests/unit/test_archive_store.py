"""The content-addressed store: names are hashes, writes are once and whole, reads re-hash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandboxharness.archive import (
    Archive,
    ArchiveError,
    ArchiveIntegrityError,
    ArchiveLimits,
    digest_of,
    load_verdict,
    put_verdict,
    resolve_verdict,
)
from sandboxharness.archive.export import export_bundle
from sandboxharness.archive.verify import verify_store
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.errors import InputError
from sandboxharness.models import Verdict


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    return Archive(tmp_path / "a", create=True)


def test_put_names_by_hash_and_get_rehashes(archive: Archive) -> None:
    digest = archive.put(b"hello")
    assert digest == digest_of(b"hello")
    path = archive.path_of(digest)
    assert path.parent.name == digest[7:9] and path.name == digest[9:]
    assert archive.get(digest) == b"hello"
    assert not os.stat(path).st_mode & 0o222  # read-only
    assert not any((archive.root / "tmp").iterdir())  # no temporary file left


def test_write_once_never_replaces(archive: Archive) -> None:
    digest = archive.put(b"v1")
    path = archive.path_of(digest)
    path.chmod(0o644)
    path.write_bytes(b"v2")  # damaged out of band
    assert archive.put(b"v1") == digest and path.read_bytes() == b"v2"  # not silently repaired
    with pytest.raises(ArchiveIntegrityError, match="changed"):
        archive.get(digest)
    assert "changed" in (archive.problem(digest) or "")


def test_missing_and_linked_objects_are_problems(archive: Archive, tmp_path: Path) -> None:
    digest = digest_of(b"absent")
    assert archive.problem(digest) == "missing"
    with pytest.raises(ArchiveIntegrityError, match="not in the archive"):
        archive.get(digest)
    other = tmp_path / "elsewhere"
    other.write_bytes(b"linked")
    link = archive.path_of(digest_of(b"linked"))
    link.parent.mkdir(parents=True)
    link.symlink_to(other)  # an object must be a file of the archive, never a link out
    assert archive.problem(digest_of(b"linked")) is not None


def test_size_caps(tmp_path: Path) -> None:
    small = Archive(tmp_path / "s", ArchiveLimits(max_object_bytes=8, max_total_bytes=12),
                    create=True)
    with pytest.raises(ArchiveError, match="per-object cap"):
        small.put(b"123456789")
    small.put(b"12345678")
    with pytest.raises(ArchiveError, match="full"):
        small.put(b"abcde")
    small.put(b"12345678")  # already there: costs nothing


def test_hash_arguments_are_checked(archive: Archive) -> None:
    for bad in ("sha256:xyz", "md5:00", "../../etc/passwd", "sha256:" + "A" * 64):
        with pytest.raises(InputError):
            archive.path_of(bad)
    with pytest.raises(InputError, match="not an archive"):
        Archive(archive.root / "sha256")


def test_verify_store_reports_changes_and_strays(archive: Archive) -> None:
    good, bad = archive.put(b"good"), archive.put(b"bad")
    assert verify_store(archive).ok
    path = archive.path_of(bad)
    path.chmod(0o644)
    path.write_bytes(b"bae")
    (archive.root / "sha256" / "zz").mkdir()
    report = verify_store(archive)
    lines = [f.line() for f in report.findings]
    assert len(lines) == 2 and any("changed" in ln for ln in lines)
    assert any("zz" in ln and "not an object" in ln for ln in lines)
    assert archive.problem(good) is None


def test_verdict_round_trip_and_prefix(archive: Archive, tmp_path: Path) -> None:
    source = archive.put(b"def run(): pass\n")
    verdict = sample_verdict(0).model_copy(update={"artifacts": {"sources/k.py": source}})
    digest = put_verdict(archive, verdict)
    assert load_verdict(archive, digest) == verdict
    assert resolve_verdict(archive, digest[7:17]) == digest
    as_file = tmp_path / "v.json"
    as_file.write_text(verdict.model_dump_json())
    assert resolve_verdict(archive, str(as_file)) == digest
    with pytest.raises(InputError):
        resolve_verdict(archive, "0000000000")
    out = tmp_path / "bundle"
    bundle = export_bundle(archive, digest, out)
    assert (out / "artifacts" / "sources" / "k.py").read_bytes() == b"def run(): pass\n"
    assert bundle.files == 3
    with pytest.raises(InputError, match="new or empty"):
        export_bundle(archive, digest, out)


def test_export_stops_on_a_changed_artifact(archive: Archive, tmp_path: Path) -> None:
    source = archive.put(b"x = 1\n")
    digest = put_verdict(archive, sample_verdict(1).model_copy(
        update={"artifacts": {"sources/k.py": source}}))
    archive.path_of(source).chmod(0o644)
    archive.path_of(source).write_bytes(b"x = 2\n")
    with pytest.raises(ArchiveIntegrityError):
        export_bundle(archive, digest, tmp_path / "b")
    assert not (tmp_path / "b").exists()  # nothing half-written


@pytest.mark.parametrize("name", ["../x", "/abs", "a//b", "./a", ".hidden/x", "a/..", "a\\b",
                                  "log\x1b[2J"])
def test_verdict_refuses_unsafe_artifact_names(name: str) -> None:
    body = sample_verdict(0).model_dump(mode="json")
    body["artifacts"] = {name: digest_of(b"")}
    with pytest.raises(ValueError):
        Verdict.model_validate(body)


def test_old_verdicts_without_artifacts_still_load() -> None:
    body = sample_verdict(2).model_dump(mode="json")
    del body["artifacts"]
    assert Verdict.model_validate(body).artifacts == {}
    body["artifacts"] = {"sources/k.py": "sha256:nothex"}
    with pytest.raises(ValueError):
        Verdict.model_validate(body)
