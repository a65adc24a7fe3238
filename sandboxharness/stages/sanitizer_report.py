"""compute-sanitizer's text report, parsed into findings grouped by kind, kernel and place.

Pure text in, data out: the sanitizer stage decides what blocks (``SanitizerRules``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_PREFIX = re.compile(r"^=+ ?")
_STARTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(Invalid (?:__\w+__ )?(?:read|write|atomic)) of size (\d+) bytes?"), "access"),
    (re.compile(r"^(Misaligned (?:__\w+__ )?(?:read|write|atomic|address))"), "misaligned"),
    (re.compile(r"^(Uninitialized __\w+__ memory read) of size (\d+) bytes?"), "uninit"),
    (re.compile(r"^(Error|Warning): (Race reported) between (\w+) access at (.+?)$"), "race"),
    (re.compile(r"^(ERROR|WARNING): Potential (\w+) hazard detected at (__\w+__) (0x[0-9a-f]+)"),
     "hazard"),
    (re.compile(r"^(Barrier error detected)\.?\s*(.*)$"), "barrier"),
    (re.compile(r"^(Invalid arguments? detected for \S+|Invalid __syncwarp.*|Illegal .*)$"),
     "sync"),
    (re.compile(r"^Program hit (\S+) \(error (\d+)\) due to \"(.+?)\" on CUDA API call to "
                r"(\S+?)\.?$"), "api"),
    (re.compile(r"^(Leaked) (\d+) bytes"), "leak"),
    (re.compile(r"^(Out-of-range Shared or Local Address|Illegal Address|"
                r"Hardware Exception.*|Malloc/Free Error.*|Device Heap.*)$"), "other"),
]
_AT = re.compile(r"^(?:at|and \w+ access at) (\S.*?)(?:\+0x[0-9a-f]+)?(?: in (\S+:\d+))?"
                 r"(?: \[(\d+) hazards?\])?$")
_ADDR = re.compile(r"Address (0x[0-9a-f]+)")
_NEAR = re.compile(r"(\d+) bytes (before|after) the nearest allocation at (0x[0-9a-f]+) "
                   r"of size (\d+) bytes")
_SUMMARY = re.compile(r"^(?:ERROR SUMMARY|RACECHECK SUMMARY): (\d+) (?:errors?|hazards?)")
TOOL_BROKEN = re.compile(r"(Device not supported|Internal Sanitizer Error|"
                          r"Target application terminated before first instrumented API call|"
                          r"Unable to find injection library|"
                          r"cannot start compute-sanitizer)", re.IGNORECASE)


@dataclass
class SanitizerFinding:
    tool: str
    kind: str
    kernel: str | None = None
    location: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    count: int = 1
    severity: str = "error"

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "kind": self.kind, "kernel": self.kernel,
                "location": self.location, "count": self.count, "severity": self.severity,
                **self.detail}


def _kernel_name(text: str) -> str:
    name = text.strip()
    depth, out = 0, []
    for ch in name:  # drop the parameter list of a demangled signature
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()[:160] or name[:160]


def _start(line: str, tool: str) -> SanitizerFinding | None:
    """The finding a report line opens, if it opens one."""
    for pattern, what in _STARTS:
        m = pattern.match(line)
        if not m:
            continue
        if what in ("access", "uninit"):
            return SanitizerFinding(tool, m.group(1), detail={"size_bytes": int(m.group(2))})
        if what == "race":
            found = SanitizerFinding(tool, f"{m.group(2)} ({m.group(3)} vs ...)",
                                     severity=m.group(1).lower())
            _apply_at(found, "at " + m.group(4))
            return found
        if what == "hazard":
            return SanitizerFinding(tool, f"Potential {m.group(2)} hazard at {m.group(3)}",
                                    severity=m.group(1).lower(), detail={"address": m.group(4)})
        if what == "api":
            return SanitizerFinding(tool, "CUDA API error", severity="api",
                                    detail={"error": m.group(1), "api": m.group(4),
                                            "message": m.group(3)[:200]})
        if what == "leak":
            return SanitizerFinding(tool, "Leak", detail={"bytes": int(m.group(2))},
                                    severity="warning")
        return SanitizerFinding(tool, m.group(1)[:160])
    return None


def parse(text: str, tool: str) -> tuple[list[SanitizerFinding], int | None]:
    """Findings (grouped by kind + kernel + location) and the reported error total."""
    groups: dict[tuple[str, str | None, str | None], SanitizerFinding] = {}
    order: list[SanitizerFinding] = []
    total: int | None = None
    current: SanitizerFinding | None = None

    def close() -> None:
        nonlocal current
        if current is None:
            return
        key = (current.kind, current.kernel, current.location)
        if key in groups:
            groups[key].count += current.count
        else:
            groups[key] = current
            order.append(current)
        current = None

    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        m = _SUMMARY.match(line)
        if m:
            close()
            total = (total or 0) + int(m.group(1))
            continue
        started = _start(line, tool)
        if started is not None:
            close()
            current = started
            continue
        if current is None:
            continue
        _continue(current, line)
    close()
    return order, total


def _continue(current: SanitizerFinding, line: str) -> None:
    """A line that adds to the open finding: where, which access, how many."""
    if line.startswith("and ") and current.kind.startswith("Race reported"):
        m2 = re.match(r"and (\w+) access at", line)
        if m2:
            current.kind = current.kind.replace("vs ...", f"vs {m2.group(1)}")
        at = _AT.match(line)
        if at and at.group(3):
            current.count = int(at.group(3))
        return
    if line.startswith("at ") and current.kernel is None:
        _apply_at(current, line)
        return
    m3 = _ADDR.search(line)
    if m3 and "address" not in current.detail:
        current.detail["address"] = m3.group(1)
    m4 = _NEAR.search(line)
    if m4:
        current.detail.update(offset_bytes=int(m4.group(1)), side=m4.group(2),
                              allocation_size=int(m4.group(4)))
    if line.startswith("by thread") and "first_thread" not in current.detail:
        current.detail["first_thread"] = line[len("by thread "):][:80]


def _apply_at(finding: SanitizerFinding, line: str) -> None:
    m = _AT.match(line)
    if not m:
        return
    finding.kernel = _kernel_name(m.group(1))
    finding.location = m.group(2)
    if m.group(3):
        finding.count = int(m.group(3))
